# tests/static/layers.awk - reading daemon/LAYERS, for layers.sh and
# symbols.sh (awk -f layers.awk -f THEIR-PROGRAM).  read_rules(FILE) fills:
#   rank[FOLDER]                 the layer's position, lowest first
#   only_prefix[i], only_allow[i] (i = 1..no): the "only" rules, in order
#   lib_header[i], lib_allow[i]  (i = 1..nlib): the "lib" rules
# layer_of(PATH) is the layer folder a path is in, or "".

function read_rules(file,   line, n, w, i) {
	while ((getline line < file) > 0) {
		sub(/#.*/, "", line)
		n = split(line, w, /[ \t]+/)
		if (n == 0 || w[1] == "")
			continue
		if (w[1] == "layer") {
			nl++
			for (i = 2; i <= n; i++)
				rank[w[i]] = nl
		} else if (w[1] == "only") {
			no++
			only_prefix[no] = w[2]
			only_allow[no] = ""
			for (i = 3; i <= n; i++)
				only_allow[no] = only_allow[no] " " w[i]
		} else if (w[1] == "lib") {
			nlib++
			lib_header[nlib] = w[2]
			lib_allow[nlib] = ""
			for (i = 3; i <= n; i++)
				lib_allow[nlib] = lib_allow[nlib] " " w[i]
		}
	}
	close(file)
}

function layer_of(path,   l, best) {
	best = ""
	for (l in rank)
		if (index(path, l) == 1 && length(l) > length(best))
			best = l
	return best
}
