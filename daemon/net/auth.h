/* daemon/net/auth.h - the cluster key, the link handshake's authentication
 * (libsodium crypto_auth, HMAC-SHA-512-256) and the protection of every frame
 * after it (ChaCha20-Poly1305, RFC 8439).  The only file that touches
 * libsodium.
 *
 * Handshake.  Both ends of a link prove that they hold the cluster key by a
 * MAC over a role byte and both HELLO bodies, which contain fresh random
 * nonces: a recorded handshake cannot be replayed.  Without a key file the
 * daemon runs in insecure mode and uses an all-zero key, which a daemon with
 * a key refuses.
 *
 * Frames (security.integrity, on by default with a key; security.encrypt).
 * When a link comes up, it gets keys of its own, one per direction, from the
 * cluster key and both HELLOs as sent (which hold both ends' fresh nonces,
 * node ids and incarnations):
 *
 *     master = BLAKE2b-256, keyed with the cluster key, of
 *              "ferry frame keys" || HELLO(connecting end) || HELLO(accepting end)
 *     key of the frames the connecting end sends = KDF(master, id 1, "ferrylnk")
 *     key of the frames the accepting end sends  = KDF(master, id 2, "ferrylnk")
 *
 * (KDF: crypto_kdf_derive_from_key, BLAKE2b with the id as salt and the
 * context as personalisation.)  So no two links, and no two directions of a
 * link, share a key; a key dies with its link.
 *
 * Each frame is sealed when it goes out on a link, over its header as sent
 * (with the ack stamped in it just then, and its seq), and opened when it
 * arrives: ChaCha20-Poly1305 (IETF) with the header and, for integrity alone,
 * the body as associated data (nothing encrypted: a MAC), or with encryption
 * the header as associated data and the body (before the tag) encrypted.  The
 * 16-byte tag ends the body (proto/wire.h).  The nonce is the number of frames
 * sealed before it on this link in this direction (64 bits little-endian,
 * then 4 zero bytes): it never repeats under a key, although a frame keeps its
 * seq when it is sent again on a later link (under that link's key, with that
 * link's count).  The receiver counts the frames it opened on the link: links
 * deliver in order (a TCP stream, an RC queue pair), so a frame that was
 * dropped, replayed, reordered, injected or altered, its header included (a
 * forged ack), fails, and the peer layer ends the link; the frames not
 * acknowledged then go out again on the next one.
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

/* --- frames --- */

enum auth_frames {
	AUTH_FRAMES_PLAIN,      /* neither (insecure mode, or security.integrity = false) */
	AUTH_FRAMES_MAC,        /* every frame authenticated (WIRE_FRAME_MAC) */
	AUTH_FRAMES_ENCRYPT,    /* and its body encrypted (WIRE_FRAME_MAC | WIRE_FRAME_SEALED) */
};

#define AUTH_LINK_KEY_BYTES 32

/* One link's frame protection (keys and counts). */
struct auth_link {
	int mode;                                       /* enum auth_frames */
	uint8_t tx_key[AUTH_LINK_KEY_BYTES];            /* what we send */
	uint8_t rx_key[AUTH_LINK_KEY_BYTES];            /* what we receive */
	uint64_t tx_count, rx_count;                    /* frames sealed, opened: the next nonces */
};

/* Starts a's protection of a link that has just authenticated: keys from the
 * cluster key and both HELLOs as sent (see the top), counts from 0.
 * outgoing: we are the connecting end. */
void auth_link_start(struct auth_link *a, int mode, int outgoing, const void *hello_i, const void *hello_a);

/* The link is gone: its keys are wiped. */
void auth_link_stop(struct auth_link *a);

/* Seals the frame at frame (len bytes: the 24-byte header as it goes out,
 * flags and ack included, then the body, whose last WIRE_TAG_BYTES are the
 * tag's room) as the next frame sent on the link, into out: frame itself
 * (in place) or len bytes elsewhere (then frame is left as it was).  Nothing
 * for AUTH_FRAMES_PLAIN (but the copy to out). */
void auth_seal(struct auth_link *a, uint8_t *frame, uint8_t *out, size_t len);

/* Opens the next frame received on the link: frame is the frame as received
 * (len bytes: header, body, tag), its body decrypted in place.  Returns 0, or
 * -EBADMSG if it is not the frame that the peer sealed next (nothing is
 * counted then, and the body may be garbage). */
int auth_open(struct auth_link *a, uint8_t *frame, size_t len);

#endif
