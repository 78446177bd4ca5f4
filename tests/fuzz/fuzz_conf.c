/* tests/fuzz/fuzz_conf.c - the configuration parser and validator on
 * arbitrary text.  Inputs with @include are skipped: libconfig 1.5 would open
 * whatever file they name, which tests the file system, not our code. */
#include "../../daemon/core/conf.c"
#include "../../daemon/plan/route.c"
#include "../../daemon/core/log.c"
#include "../../proto/job.c"
#include "../../proto/ctl.c"         /* (the algorithms' names collectives.* takes) */
#include "../../proto/ring.c"        /* (which ctl.c uses) */

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[512];
	struct conf c;

	memcpy(text, data, size);
	text[size] = '\0';
	if (!strstr(text, "@include")) {
		conf_load_string(&c, text, "fuzz.conf", err, sizeof(err));
		conf_free(&c);
	}
	free(text);
	return 0;
}
