/* daemon/main/topology.h - what ferryd --check-config prints: the resolved
 * topology, every node's coordinates and peers, and the settings in effect. */
#ifndef FERRY_MAIN_TOPOLOGY_H
#define FERRY_MAIN_TOPOLOGY_H

#include "../core/conf.h"

#include <stdio.h>

void topology_print(FILE *out, const struct conf *c);

#endif
