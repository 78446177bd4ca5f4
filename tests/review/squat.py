import socket, sys, time
# keep N unauthenticated TCP connections open to host:port, reopening closed ones
host, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
socks = []
end = time.time() + secs
while time.time() < end:
    alive = []
    for s in socks:
        try:
            s.setblocking(False)
            d = s.recv(1)
            if d == b'':
                s.close(); continue
        except BlockingIOError:
            pass
        except OSError:
            s.close(); continue
        alive.append(s)
    socks = alive
    while len(socks) < n:
        try:
            s = socket.create_connection((host, port), timeout=1)
            socks.append(s)
        except OSError:
            break
    time.sleep(0.01)
