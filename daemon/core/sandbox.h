/* daemon/core/sandbox.h - ferryd's own seccomp allow-list, installed once
 * start-up is done (the only module that touches libseccomp).  The calls it
 * allows are listed in sandbox.def, which is also where the systemd unit's
 * SystemCallFilter= comes from.  A filter cannot be removed, so there is no
 * sandbox_fini: it ends with the process. */
#ifndef FERRY_SANDBOX_H
#define FERRY_SANDBOX_H

#include <stdio.h>

enum sandbox_mode {
	SANDBOX_KILL,   /* a call outside the list kills the process (the default) */
	SANDBOX_LOG,    /* such a call is made, and the kernel logs it (finding what is missing) */
	SANDBOX_OFF,    /* no filter */
};

/* Installs the filter for the rest of the process's life (and sets
 * no_new_privs, which a filter needs without CAP_SYS_ADMIN).  For
 * SANDBOX_OFF does nothing.  Returns 0, or a negative errno (logged) if the
 * filter could not be installed. */
int sandbox_init(int mode);

/* Makes a call the filter forbids: execve() of a path that does not
 * exist, so that it is harmless without the filter.  With the filter in
 * SANDBOX_KILL mode it does not return; otherwise it returns the negative
 * errno of the failed call (-ENOENT), or 0 if it ran a program (it cannot).
 * For ferryctl debug forbidden-call: proof that the filter is on. */
int sandbox_probe(void);

/* "kill", "log" or "off". */
const char *sandbox_mode_name(int mode);

/* Writes the names of the calls this build's filter allows to out, one a
 * line; those only a sanitizer build allows are followed by " san". */
void sandbox_list(FILE *out);

#endif
