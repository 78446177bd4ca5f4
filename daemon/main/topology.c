/* daemon/main/topology.c - see topology.h. */
#include "topology.h"

#include <stdlib.h>

static void print_coords(FILE *out, const struct route *r, uint32_t node)
{
	uint32_t c[ROUTE_MAX_DIMS];

	route_coords(r, node, c);
	fputc('(', out);
	for (uint32_t d = 0; d < r->ndims; d++)
		fprintf(out, "%s%u", d ? "," : "", c[d]);
	fputc(')', out);
}

void topology_print(FILE *out, const struct conf *c)
{
	const struct route *r = &c->route;
	uint32_t *peers = calloc(r->nnodes, sizeof(*peers));
	uint32_t maxp = 0, maxh = 0;
	char dims[128], cpus[256];

	route_dims_str(r, dims, sizeof(dims));
	fprintf(out, "cluster \"%s\": %u node%s, %s network\n", c->cluster_name, c->nnodes,
		c->nnodes == 1 ? "" : "s", conf_physical_name(c->physical));
	if (c->physical == CONF_SWITCHED)
		fprintf(out, "routing: virtual grid %s (%s)%s\n", dims,
			c->virtual_kind == CONF_VIRT_AUTO ? "auto" :
			c->virtual_kind == CONF_VIRT_DIRECT ? "direct" : "configured",
			r->npos > r->nnodes ? ", with empty positions at the end" : "");
	else
		fprintf(out, "routing: %s %s, neighbours only\n", conf_physical_name(c->physical), dims);
	for (uint32_t n = 0; n < c->nnodes && peers; n++) {
		uint32_t np = route_peers(r, n, peers, r->nnodes);

		fprintf(out, "node %u %s:%u ", n, c->nodes[n].host, c->nodes[n].port);
		print_coords(out, r, n);
		fprintf(out, " peers");
		for (uint32_t i = 0; i < np; i++)
			fprintf(out, " %u", peers[i]);
		fputc('\n', out);
		if (np > maxp)
			maxp = np;
	}
	for (uint32_t d = 0; d < c->nnodes && c->nnodes <= 4096; d++) {
		int h = route_hops(r, 0, d);

		if (h > (int)maxh)
			maxh = (uint32_t)h;
	}
	fprintf(out, "links per node: at most %u; hops from node 0: at most %u\n", maxp, maxh);
	fprintf(out, "aggregation: buffer_bytes %u, flush_us %u\n", c->buffer_bytes, c->flush_us);
	fprintf(out, "transport: %s\n", conf_transport_name(c->transport));
	fprintf(out, "limits: max_clients %u, ring_bytes %llu, memory_bytes %llu, pending_bytes %llu, "
		"link_bytes %llu\n", c->max_clients, (unsigned long long)c->ring_bytes,
		(unsigned long long)c->memory_bytes, (unsigned long long)c->pending_bytes,
		(unsigned long long)c->link_bytes);
	fprintf(out, "direct: max_ranks %u, ring_bytes %llu\n", c->direct_max_ranks,
		(unsigned long long)c->direct_ring_bytes);
	fprintf(out, "security: %s\n", c->key_file[0] ? c->key_file : "no key_file: insecure mode");
	conf_cpus_str(&c->cpus, cpus, sizeof(cpus));
	fprintf(out, "daemon: runtime_dir %s, spin_us %u, cpus %s\n", c->runtime_dir, c->spin_us,
		CPU_COUNT(&c->cpus) ? cpus : "unset (not pinned)");
	free(peers);
}
