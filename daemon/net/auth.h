/* daemon/net/auth.h - the cluster key and the link handshake's authentication
 * (libsodium crypto_auth, HMAC-SHA-512-256).  The only file that touches
 * libsodium.
 *
 * Both ends of a link prove that they hold the cluster key by a MAC over a
 * role byte and both HELLO bodies, which contain fresh random nonces: a
 * recorded handshake cannot be replayed.  Without a key file the daemon runs
 * in insecure mode and uses an all-zero key, which a daemon with a key refuses.
 * Frames after the handshake are neither encrypted nor individually
 * authenticated: the links are meant for a trusted cluster network.
 */
#ifndef FERRY_AUTH_H
#define FERRY_AUTH_H

#include "../../proto/wire.h"

#include <stddef.h>
#include <stdint.h>

/* Loads the cluster key (64 hex digits; whitespace ignored).  The key systemd
 * passes as a credential comes first: $CREDENTIALS_DIRECTORY/cluster.key
 * (the unit's LoadCredential=), unless it holds "none" (the unit's fallback
 * when there is no key file).  Otherwise the key is read from path, and
 * "" there means insecure mode.  Errors are logged. */
int auth_init(const char *path);
void auth_fini(void);

int auth_insecure(void);

/* Random bytes (nonces, incarnations). */
void auth_random(void *buf, size_t len);

/* MAC for role ('I' connecting end, 'A' accepting end) over both HELLOs as
 * sent (wire encoding). */
void auth_mac(uint8_t mac[WIRE_MAC_BYTES], char role, const void *hello_i, const void *hello_a);

/* Returns 1 if mac is right for role, in constant time. */
int auth_check(const uint8_t mac[WIRE_MAC_BYTES], char role, const void *hello_i, const void *hello_a);

#endif
