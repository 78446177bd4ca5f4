#!/bin/sh
# /init of the soft-RoCE test VM (busybox sh; output on ttyS0).  Loads the
# rxe modules, makes four rxe devices, each on a veth whose other end is a
# port of bridge br0 (the "switch"), routes the traffic between their
# addresses over the wire (two local addresses would otherwise talk through
# lo, where rxe does not look), runs /tests/vm-tests.sh and reports to the
# host through isa-debug-exit.
#
# Why the bridge: the tests take ports down by pulling the "cable" (setting
# the bridge's end down, so the rxe netdev loses its carrier) rather than by
# setting the rxe netdev itself down.  An admin-down netdev has no route, and
# in rxe (Debian's 6.1) a send that fails for want of a route puts the GSI
# queue pair (QP1, which carries the connection manager's messages) in the
# error state for good: the device then takes no connection until rdma_rxe is
# reloaded.  The daemons' DREQs for the links that failed with the port are
# such sends.
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
ip() { /usr/bin/ip "$@"; }      # busybox would run its own ip applet
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
KV=$(uname -r)
for m in $(cat /lib/modules/$KV/load-order); do
	insmod /lib/modules/$KV/$m || echo "insmod $m FAILED"
done
ip link set lo up
ip link add br0 type bridge
for i in 0 1 2 3; do
	ip link add veth$i type veth peer name veth${i}p
	ip link set veth${i}p master br0
	ip addr add 10.0.0.$((i + 1))/24 dev veth$i
done
for i in br0 veth0p veth1p veth2p veth3p veth0 veth1 veth2 veth3; do ip link set $i up; done
for i in all default veth0 veth1 veth2 veth3; do
	echo 1 >/proc/sys/net/ipv4/conf/$i/accept_local
	echo 0 >/proc/sys/net/ipv4/conf/$i/rp_filter
done
# Only the veth holding an address answers ARP for it: br0 and the other
# veths see the requests too and would otherwise answer with their own MAC,
# and what then reaches them never reaches the right rxe.
echo 1 >/proc/sys/net/ipv4/conf/all/arp_ignore
# What is sent from address i (by this host: iif lo) goes out of veth i, to
# any of the other addresses.
for i in 0 1 2 3; do
	ip rule add pref 10 from 10.0.0.$((i + 1)) iif lo lookup $((100 + i))
	for j in 0 1 2 3; do
		[ $i = $j ] || ip route add 10.0.0.$((j + 1)) dev veth$i src 10.0.0.$((i + 1)) table $((100 + i))
	done
done
ip rule add pref 20 lookup local
ip rule del pref 0 lookup local
sleep 1
for i in 0 1 2 3; do rdma link add rxe$i type rxe netdev veth$i; done
sleep 1
ibv_devices
/bin/bash /tests/vm-tests.sh
st=$?
echo "VM-TESTS-STATUS $st"
[ $st -eq 0 ] || st=1
[ -c /dev/port ] && printf "\\$(printf %03o $st)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
