# ferry - build, test, demo, install.
#
#   make            build ferryd, ferryctl, libferry (shared + static), ferry.pc
#   make check      install missing Debian packages, build, run the test suite
#                   (plain build, then ASan+UBSan build; clang must compile it
#                   too), print "N passed, N failed" (", N skipped" if any)
#   make check-launch  jobs started by a real Slurm (srun, sbatch, salloc) and by
#                   Open MPI's mpirun on local nodes of namespaces (root; installs
#                   Slurm, munge, Open MPI), both builds, the same summary line
#   make demo       install missing packages, build, run a local demonstration
#   make install    DESTDIR= PREFIX=/usr/local SYSCONFDIR=/etc (MANDIR=PREFIX/share/man)
#   make deb        Debian packages ferryd, libferry0, libferry-dev into build/deb/
#                   (packaging/debian/; dpkg-buildpackage -us -uc -b on a copy of the tree)
#   make check-deb  make deb, then lintian on the packages ("N passed, N failed")
#   make check-system  the packages on Debian 12 booted with systemd in a QEMU VM
#   make fuzz       run every fuzz harness for FUZZ_SECONDS (default 60) each
#   make soak       a cluster under sustained abuse for SOAK_SECONDS (default 600)
#   make bench      benchmarks against Open MPI and the hardware (QUICK=1: 1 minute);
#                   results in build/bench/<time>/ (summary.md, CSVs, PNG plots);
#                   one family: make bench-a2a, bench-latency, bench-rate,
#                   bench-bw, bench-security, bench-knobs, bench-coll, bench-sg,
#                   bench-red, bench-redtc, bench-costs, bench-apps, bench-mpi (at most 10 minutes each)
#   make apps       the applications (tests/apps/: HPCC RandomAccess against Debian's
#                   hpcc, bale's histogram, index-gather, permutation against MPI), one
#                   line per measurement (APPS_QUICK=1: half a minute; else 3 minutes)
#   make clean
#
# Build products go to $(BUILD) (default build/); SAN=1 builds with
# AddressSanitizer and UndefinedBehaviorSanitizer (into build/san by default).

SHELL      := /bin/bash
VERSION    := 0.1.0
SOVERSION  := 0

PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MANDIR     ?= $(PREFIX)/share/man

ifeq ($(SAN),1)
BUILD      ?= build/san
# FERRY_SANITIZERS: the seccomp filter lets the sanitizers' runtime make its
# calls too (daemon/core/sandbox.def).
SANFLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -DFERRY_SANITIZERS
else
BUILD      ?= build
SANFLAGS   :=
endif
# One spelling of the build directory, relative where it lies here: the
# dependency files (-MMD) name their targets as the compiler was told, and a
# build once run with BUILD=/abs/path (tests/integration/install.sh) would
# otherwise leave .d files whose rules never match the relative targets, and
# objects that a changed header does not rebuild.
override BUILD := $(patsubst $(CURDIR)/%,%,$(BUILD))

CC         ?= cc
CFLAGS     ?= -O2 -g
CPPFLAGS   ?=
WARN       := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# -ffp-contract=off: the cost module's predictions (daemon/plan/cost.c) are
# compared on every node of a job to choose the same algorithm and layout;
# a build that fused a multiply and an add (FMA: -march=haswell, aarch64's
# default) would round differently and break ties otherwise, and the nodes
# would plan different operations.  Nodes run the same ferry (WIRE_VERSION).
ALL_CFLAGS := -std=gnu11 -D_GNU_SOURCE -DFERRY_VERSION='"$(VERSION)"' $(WARN) $(CPPFLAGS) $(CFLAGS) -ffp-contract=off $(SANFLAGS) -MMD -MP
LDFLAGS    ?=
ALL_LDFLAGS := $(LDFLAGS) $(SANFLAGS)

# Evaluated when a recipe runs, so that `make check` can install the packages first.
DAEMON_PKGS = libconfig libsystemd libsodium libibverbs librdmacm libseccomp
pkgflags    = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkglibs     = $(shell pkg-config --libs $(1) 2>/dev/null || echo __missing_$(1))

# daemon/ has one folder per layer (README, "Layout"; tests/layers.sh checks
# that includes point down).  plan/ is pure code, a library of its own that
# ferryd, ferryctl and the unit tests link; the rest of the daemon except
# main/ is an archive the unit tests link too.
PROTO_SRC  := proto/ring.c proto/ctl.c proto/wire.c proto/job.c
PLAN_SRC   := $(wildcard daemon/plan/*.c)
DAEMON_LIB_SRC := $(filter-out daemon/plan/% daemon/main/%,$(wildcard daemon/*/*.c))
DAEMON_SRC := $(wildcard daemon/main/*.c) $(DAEMON_LIB_SRC)
LIB_SRC    := $(filter-out client/ferryctl.c,$(wildcard client/*.c)) proto/ring.c proto/ctl.c proto/job.c
CTL_SRC    := client/ferryctl.c proto/ctl.c proto/ring.c proto/job.c

DAEMON_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(DAEMON_SRC) $(PROTO_SRC))
DAEMON_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(DAEMON_LIB_SRC))
PLAN_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(PLAN_SRC))
PROTO_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(PROTO_SRC))
LIB_OBJ    := $(patsubst %.c,$(BUILD)/pic/%.o,$(LIB_SRC))
CTL_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(CTL_SRC))
PLAN_LIB   := $(BUILD)/libplan.a
DAEMON_LIB := $(BUILD)/libferryd.a
PROTO_LIB  := $(BUILD)/libproto.a

SONAME     := libferry.so.$(SOVERSION)
LIBSO      := $(BUILD)/libferry.so.$(VERSION)

PROGS      := $(patsubst tests/progs/%.c,$(BUILD)/tests/%,$(wildcard tests/progs/*.c))
UNITS      := $(patsubst tests/unit/%.c,$(BUILD)/unit/%,$(wildcard tests/unit/test_*.c))
FUZZERS    := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
BENCH_FERRY := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/fb_*.c))
BENCH_MPI   := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/mb_*.c))
BENCH_RAW   := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/raw_*.c))
APPS_FERRY  := $(patsubst tests/apps/%.c,$(BUILD)/apps/%,$(wildcard tests/apps/ferry_*.c))
APPS_MPI    := $(patsubst tests/apps/%.c,$(BUILD)/apps/%,$(wildcard tests/apps/mpi_*.c))
# make check builds the MPI apps where Open MPI is installed (its test runs
# them then, and says SKIP otherwise).
HAVE_MPICC   = $(shell command -v mpicc 2>/dev/null)
BENCH_FAMILIES := a2a latency rate bw security knobs coll sg red redtc costs apps mpi

# libferry-mpi (client/mpi/): the MPI profiling-interface library that runs
# an unchanged MPI program's collectives in ferryd (README, "MPI
# programs"), built against the MPI whose mpicc is on the PATH (Debian's
# Open MPI: packaging/deps.sh installs it), with the MPI test programs
# (tests/mpi/); mpicc runs $(CC) (OMPI_CC, MPICH_CC), so that make check's
# clang build compiles it too.  Without mpicc, nothing of it is built and
# tests/integration/mpi_*.sh say SKIP.
MPICC      ?= mpicc
MPICC_CC   = OMPI_CC=$(CC) MPICH_CC=$(CC) $(MPICC)
HAVE_MPI   := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
MPI_SRC    := $(wildcard client/mpi/*.c)
MPI_OBJ    := $(patsubst %.c,$(BUILD)/mpi/%.o,$(MPI_SRC))
MPI_SONAME := libferry-mpi.so.$(SOVERSION)
MPI_LIBSO  := $(BUILD)/libferry-mpi.so.$(VERSION)
MPI_PROGS  := $(patsubst tests/mpi/%.c,$(BUILD)/tests/%,$(wildcard tests/mpi/fm_*.c))
# libferry-mpich: the same sources built against MPICH, whose mpi.h and ABI
# differ from Open MPI's (handles are ints, MPI_IN_PLACE is -1), under a
# name and soname of its own, where Debian's MPICH is installed beside Open
# MPI (packaging/deps.sh; mpicc and mpirun stay Open MPI's: MPICH's are
# called by name).  Its test programs (the same tests/mpi/ sources) go to
# $(BUILD)/tests/mpich/, run by tests/integration/mpich.sh under mpiexec.mpich.
MPICHCC      ?= mpicc.mpich
MPICHCC_CC   = MPICH_CC=$(CC) $(MPICHCC)
HAVE_MPICH   := $(shell command -v $(MPICHCC) >/dev/null 2>&1 && echo 1)
MPICH_OBJ    := $(patsubst %.c,$(BUILD)/mpich/%.o,$(MPI_SRC))
MPICH_SONAME := libferry-mpich.so.$(SOVERSION)
MPICH_LIBSO  := $(BUILD)/libferry-mpich.so.$(VERSION)
MPICH_PROGS  := $(patsubst tests/mpi/%.c,$(BUILD)/tests/mpich/%,$(wildcard tests/mpi/fm_*.c))
MPI_ALL    := $(if $(HAVE_MPI),$(MPI_LIBSO)) $(if $(HAVE_MPICH),$(MPICH_LIBSO))


.PHONY: mpi all deps check check-run check-rdma check-coll check-launch demo demo-run install install-man uninstall fuzz clean tests bench soak apps deb check-deb check-system \
	bench-deps $(addprefix bench-,$(BENCH_FAMILIES))

all: $(BUILD)/ferryd $(BUILD)/ferryctl $(LIBSO) $(BUILD)/libferry.a $(BUILD)/ferry.pc $(MPI_ALL)

mpi: $(MPI_LIBSO) $(MPI_PROGS) $(if $(HAVE_MPICH),$(MPICH_LIBSO) $(MPICH_PROGS))

deps:
	@packaging/deps.sh

# --- objects ---

# ferryd is linked with link-time optimisation: an item's way through the
# daemon crosses files (ring, endpoint, aggregation, wire encoding), and LTO
# lets the compiler inline across them.  The objects are "fat" (they carry
# ordinary code too), so the archives the unit tests link work without it.
# Not in sanitizer builds, which gain nothing from it and build slower, nor
# with clang (make check's second compiler, for its warnings), whose LTO
# objects are bitcode that plain archives and links cannot use.
# Which compiler CC is, from what it says it is: "cc" is clang on some
# systems (update-alternatives), and clang refuses -ffat-lto-objects.
CC_IS_CLANG := $(shell $(CC) --version 2>/dev/null | head -n 1 | grep -qi clang && echo 1)
ifneq ($(SAN),1)
ifneq ($(CC_IS_CLANG),1)
LTO        := -flto=auto -ffat-lto-objects
endif
endif

$(BUILD)/obj/daemon/%.o: daemon/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LTO) $(call pkgflags,$(DAEMON_PKGS)) -c -o $@ $<

$(BUILD)/obj/proto/%.o: proto/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LTO) -c -o $@ $<

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# libferry: position independent, hidden unless marked FERRY_API.
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

# --- programs and libraries ---

$(PLAN_LIB): $(PLAN_OBJ)
	rm -f $@
	ar rcs $@ $^

$(DAEMON_LIB): $(DAEMON_LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(PROTO_LIB): $(PROTO_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/ferryd: $(DAEMON_OBJ) $(PLAN_LIB)
	$(CC) $(ALL_CFLAGS) $(LTO) $(ALL_LDFLAGS) -o $@ $^ $(call pkglibs,$(DAEMON_PKGS))

$(BUILD)/ferryctl: $(CTL_OBJ) $(PLAN_LIB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(call pkglibs,libsodium)

$(LIBSO): $(LIB_OBJ) packaging/libferry.map
	$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=packaging/libferry.map \
		-Wl,-z,defs -o $@ $(LIB_OBJ)
	ln -sf libferry.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libferry.so

# libferry-mpi and libferry-mpich find libferry next to themselves
# ($$ORIGIN), in the build directory as where they are installed.
# $(call mpi_so,COMPILER,NAME): links $@ (NAME.so.$(VERSION)) from the
# objects among its prerequisites, with its soname's and the plain links.
mpi_so = $(1) $(ALL_LDFLAGS) -shared -Wl,-soname,$(2).so.$(SOVERSION) -Wl,--version-script=packaging/libferry-mpi.map \
	-Wl,-z,defs -o $@ $(filter %.o,$^) -L$(BUILD) -lferry -Wl,-rpath,'$$ORIGIN' && \
	ln -sf $(2).so.$(VERSION) $(BUILD)/$(2).so.$(SOVERSION) && ln -sf $(2).so.$(SOVERSION) $(BUILD)/$(2).so

$(BUILD)/mpi/%.o: %.c
	@mkdir -p $(@D)
	$(MPICC_CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(MPI_LIBSO): $(MPI_OBJ) $(LIBSO) packaging/libferry-mpi.map
	$(call mpi_so,$(MPICC_CC),libferry-mpi)

$(BUILD)/mpich/%.o: %.c
	@mkdir -p $(@D)
	$(MPICHCC_CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(MPICH_LIBSO): $(MPICH_OBJ) $(LIBSO) packaging/libferry-mpi.map
	$(call mpi_so,$(MPICHCC_CC),libferry-mpich)

# The static archive is one relocatable object whose internal symbols are made
# local, so that only ferry_* can clash with an application's names.
$(BUILD)/libferry.a: $(LIB_OBJ)
	ld -r -o $(BUILD)/libferry-all.o $(LIB_OBJ)
	objcopy --localize-hidden $(BUILD)/libferry-all.o
	rm -f $@
	ar rcs $@ $(BUILD)/libferry-all.o

# Made again by `install`, with the prefix given there.
PCSUBST = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
              -e 's|@VERSION@|$(VERSION)|' packaging/ferry.pc.in
$(BUILD)/ferry.pc: packaging/ferry.pc.in Makefile
	@mkdir -p $(@D)
	$(PCSUBST) > $@

# --- tests ---

# Test programs link the shared library from the build directory.
$(BUILD)/tests/%: tests/progs/%.c $(LIBSO) tests/progs/common.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Iclient -o $@ $< -L$(BUILD) -lferry -Wl,-rpath,$(abspath $(BUILD))

# MPI test programs: plain MPI, run with and without LD_PRELOAD=libferry-mpi.so
# (in a sanitizer build, the ASan runtime preloaded first: tests/mpi/lib.sh).
$(BUILD)/tests/fm_%: tests/mpi/fm_%.c tests/mpi/fm.h
	@mkdir -p $(@D)
	$(MPICC_CC) $(ALL_CFLAGS) -o $@ $<

$(BUILD)/tests/mpich/fm_%: tests/mpi/fm_%.c tests/mpi/fm.h
	@mkdir -p $(@D)
	$(MPICHCC_CC) $(ALL_CFLAGS) -o $@ $<

# ft_raw and ft_conns speak the protocol by hand, with the proto/ code linked in.
# Programs and harnesses built from several sources in one command get no
# usable .d file (each source's dependencies overwrite the last's), so they
# depend on every header there is: a changed header must rebuild them.
ALL_HDR    := $(wildcard proto/*.h client/*.h daemon/*/*.h tests/unit/*.h)

$(BUILD)/tests/ft_raw $(BUILD)/tests/ft_conns: $(BUILD)/tests/%: tests/progs/%.c $(PROTO_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(PROTO_SRC)

# ft_splitlie lies in a split through libferry's static exchange: it
# includes client/coll.c and links the rest of libferry's sources.
$(BUILD)/tests/ft_splitlie: tests/progs/ft_splitlie.c $(LIB_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Iclient -o $@ $< $(filter-out client/coll.c,$(LIB_SRC))

# ft_peer pretends to be a daemon on a link.
$(BUILD)/tests/ft_peer: tests/progs/ft_peer.c $(PROTO_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(PROTO_SRC) $(call pkglibs,libsodium)

# ft_rdmaflood opens RDMA connections that never authenticate (tests/rdma/).
$(BUILD)/tests/ft_rdmaflood: tests/progs/ft_rdmaflood.c proto/wire.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(call pkglibs,libibverbs librdmacm)

# ft_deny runs a program under a seccomp filter that kills one call.
$(BUILD)/tests/ft_deny: tests/progs/ft_deny.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(call pkglibs,libseccomp)

# ft_direct forbids itself membarrier in one of its modes.
$(BUILD)/tests/ft_direct: tests/progs/ft_direct.c $(LIBSO) tests/progs/common.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Iclient -o $@ $< -L$(BUILD) -lferry -Wl,-rpath,$(abspath $(BUILD)) $(call pkglibs,libseccomp)

# ft_mitm relays and attacks a link between two daemons.
$(BUILD)/tests/ft_mitm: tests/progs/ft_mitm.c $(PROTO_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(PROTO_SRC)

# Unit tests link the daemon's layers, plan/ and proto/ as archives; a test may
# include the module under test to reach its statics (the archive member with
# the same symbols is then not pulled in).
$(BUILD)/unit/test_%: tests/unit/test_%.c tests/unit/check.h $(DAEMON_LIB) $(PLAN_LIB) $(PROTO_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(call pkgflags,$(DAEMON_PKGS)) -o $@ $< $(DAEMON_LIB) $(PLAN_LIB) $(PROTO_LIB) \
		$(call pkglibs,$(DAEMON_PKGS)) -lpthread

FUZZ_CC    ?= clang
FUZZ_FLAGS := -std=gnu11 -D_GNU_SOURCE -DFERRY_VERSION='"$(VERSION)"' -g -O1 -fsanitize=fuzzer,address,undefined
# The peer layer's state machine runs on the in-memory transport of the unit
# tests, with the modules it needs compiled in.
FUZZ_PEER_SRC := $(PROTO_SRC) $(PLAN_SRC) daemon/core/log.c daemon/core/loop.c daemon/core/conf.c \
                 $(wildcard daemon/net/*.c)
$(BUILD)/fuzz/fuzz_peer: tests/fuzz/fuzz_peer.c $(FUZZ_PEER_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(call pkgflags,$(DAEMON_PKGS)) -o $@ $< $(FUZZ_PEER_SRC) $(call pkglibs,$(DAEMON_PKGS))

# The data path (forwarding, cluster control items, TX draining) runs the
# whole daemon library on that transport.
FUZZ_FWD_SRC := $(PROTO_SRC) $(PLAN_SRC) $(DAEMON_LIB_SRC)
$(BUILD)/fuzz/fuzz_fwd: tests/fuzz/fuzz_fwd.c $(FUZZ_FWD_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(call pkgflags,$(DAEMON_PKGS)) -o $@ $< $(FUZZ_FWD_SRC) $(call pkglibs,$(DAEMON_PKGS))

# The control-socket sessions over real sockets, with the local layer and the
# collective engine under them (its way to other nodes stubbed in the harness);
# its pieces are small, so the engine holds other nodes back far sooner.
FUZZ_SESSION_SRC := $(PROTO_SRC) $(PLAN_SRC) daemon/core/log.c daemon/core/loop.c daemon/core/conf.c daemon/core/closer.c \
                    $(wildcard daemon/local/*.c) $(wildcard daemon/coll/*.c) daemon/cluster/costs.c
$(BUILD)/fuzz/fuzz_session: tests/fuzz/fuzz_session.c $(FUZZ_SESSION_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -DCOLL_HOLD_BYTES=100 -DCOLL_RESUME_BYTES=50 $(call pkgflags,$(DAEMON_PKGS)) -o $@ $< \
		$(FUZZ_SESSION_SRC) $(call pkglibs,$(DAEMON_PKGS))

# The collective executor, fed pieces by hostile peers over every planner's
# schedules; coverage of the executor and the harness guides it (fuzz_coll.cov).
FUZZ_COLL_SRC := $(PROTO_SRC) $(PLAN_SRC) daemon/coll/exec.c
$(BUILD)/fuzz/fuzz_coll: tests/fuzz/fuzz_coll.c tests/fuzz/fuzz_coll.cov $(FUZZ_COLL_SRC) $(ALL_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize-coverage-allowlist=tests/fuzz/fuzz_coll.cov -o $@ $< $(FUZZ_COLL_SRC)

# libferry's reading of direct rings, compiled in whole (it is static there).
$(BUILD)/fuzz/fuzz_direct: tests/fuzz/fuzz_direct.c client/recv.c proto/ring.c $(ALL_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $<

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(PROTO_SRC) daemon/core/conf.c daemon/plan/route.c daemon/core/log.c $(ALL_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(call pkgflags,$(DAEMON_PKGS)) -o $@ $< $(call pkglibs,$(DAEMON_PKGS))

tests: all $(PROGS) $(UNITS) $(BENCH_FERRY) $(BENCH_RAW) $(APPS_FERRY) $(if $(HAVE_MPICC),$(APPS_MPI)) \
	$(if $(HAVE_MPI),$(MPI_PROGS)) $(if $(HAVE_MPICH),$(MPICH_PROGS))

check: deps
	@$(MAKE) --no-print-directory check-run

check-run:
	@$(MAKE) --no-print-directory tests
	@$(MAKE) --no-print-directory SAN=1 tests
	@echo "# compiling with clang too (-Werror)"
	@$(MAKE) --no-print-directory -s BUILD=build/clang CC=clang all $(patsubst $(BUILD)/%,build/clang/%,$(PROGS))
	@$(MAKE) --no-print-directory $(FUZZERS)
	@tests/run.sh build build/san

# --- benchmarks (make bench; QUICK=1 for the one-minute subset) ---

BENCH_OUT   := $(or $(BENCH_OUT),build/bench/$(shell date -u +%Y%m%d-%H%M%S))

$(BUILD)/bench/fb_%: tests/bench/fb_%.c $(LIBSO) tests/progs/common.h tests/bench/overlap.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Iclient -o $@ $< -L$(BUILD) -lferry -Wl,-rpath,$(abspath $(BUILD))

$(BUILD)/bench/mb_%: tests/bench/mb_%.c tests/bench/overlap.h
	@mkdir -p $(@D)
	mpicc -O2 -g -Wall -Wextra -o $@ $<

# mb_sg is fb_sg.c built with Open MPI, mb_red fb_red.c.
$(BUILD)/bench/mb_sg: tests/bench/fb_sg.c
$(BUILD)/bench/mb_red: tests/bench/fb_red.c

$(BUILD)/bench/raw_%: tests/bench/raw_%.c proto/ring.c proto/ring.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< proto/ring.c

# raw_tcp seals frames as the daemon does (libsodium).
$(BUILD)/bench/raw_tcp: tests/bench/raw_tcp.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(call pkglibs,libsodium)

# The applications (tests/apps/, README "Applications"): ferry's and the
# MPI versions.
$(BUILD)/apps/ferry_%: tests/apps/ferry_%.c $(LIBSO) tests/apps/app.h tests/apps/fapp.h tests/progs/common.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Iclient -o $@ $< -L$(BUILD) -lferry -Wl,-rpath,$(abspath $(BUILD))

$(BUILD)/apps/mpi_%: tests/apps/mpi_%.c tests/apps/app.h
	@mkdir -p $(@D)
	mpicc -O2 -g -Wall -Wextra -Werror -o $@ $<

# make apps: every application and its comparators (tests/apps/run.sh), one
# line per measurement; APPS_QUICK=1 for the subset.  Results in
# build/apps-out/<time>/: apps.csv, hpcc's output files, and the summary
# (apps.md, with the targets) and plot (apps.png) of make bench-apps.
APPS_OUT    := $(or $(APPS_OUT),build/apps-out/$(shell date -u +%Y%m%d-%H%M%S))
apps:
	@packaging/deps.sh bench
	@$(MAKE) --no-print-directory -s all $(APPS_FERRY) $(APPS_MPI)
	@tests/apps/run.sh $(BUILD) $(APPS_OUT) $(if $(APPS_QUICK),quick); rc=$$?; \
		tests/bench/apps_report.sh $(APPS_OUT); echo "# summary $(APPS_OUT)/apps.md, plot apps.png"; exit $$rc

# make bench runs every family (BENCH_FAMILIES, above) in turn into one
# directory and one summary; make bench-FAMILY runs one
# (tests/bench/run.sh says what each measures).
bench-deps:
	@packaging/deps.sh bench
	@$(MAKE) --no-print-directory -s all $(BENCH_FERRY) $(BENCH_MPI) $(BENCH_RAW) $(BUILD)/tests/ft_stream \
		$(APPS_FERRY) $(APPS_MPI)

bench $(addprefix bench-,$(BENCH_FAMILIES)): bench-deps
	@tests/bench/run.sh $(BUILD) $(BENCH_OUT) $(if $(QUICK),quick,full) \
		$(if $(filter bench,$@),$(BENCH_FAMILIES),$(@:bench-%=%))
	@ln -sfn $(notdir $(BENCH_OUT)) build/bench/latest
	@cat $(BENCH_OUT)/summary.md

# A cluster under sustained abuse (tests/soak/soak.sh): SOAK_SECONDS, default
# 10 minutes.
SOAK_SECONDS ?= 600
soak: deps
	@$(MAKE) --no-print-directory -s all $(PROGS)
	@SOAK_SECONDS=$(SOAK_SECONDS) BUILD=$(BUILD) bash tests/soak/soak.sh

# The collectives' full product of node counts, layouts, strategies and
# sizes (tests/coll/full.sh; make check runs a pairwise part of it).  The
# summary counts as tests/run.sh does.
check-coll: deps
	@$(MAKE) --no-print-directory -s all $(PROGS)
	@BUILD=$(abspath $(BUILD)) bash tests/coll/full.sh | tee build/coll.log; rc=$${PIPESTATUS[0]}; \
	p=$$(grep -ac '^ok - ' build/coll.log); f=$$(grep -ac '^not ok - ' build/coll.log); \
	echo "$$p passed, $$f failed"; exit $$rc

# RDMA verbs for real: soft-RoCE in a QEMU VM (tests/rdma/).  The summary
# counts as tests/run.sh does (tests/summary.sh): "N passed, N failed",
# ", N skipped" if any.
check-rdma:
	@packaging/deps.sh rdma
	@$(MAKE) --no-print-directory -s all $(PROGS)
	@tests/rdma/run.sh $(BUILD) | tee build/rdma.log; rc=$${PIPESTATUS[0]}; \
	tests/summary.sh build/rdma.log; exit $$rc

# Jobs as cluster users start them (tests/launch/): a local Slurm (slurmctld,
# a slurmd per node, munge) and Open MPI's mpirun on four nodes of
# namespaces, a ferryd on each; on both builds (80-90 s).  Not in make
# check: it needs Slurm's, munge's and Open MPI's packages, and with their
# install it would add more than the two minutes make check's budget leaves
# (README, "Tests").  The summary line is tests/run.sh's.
check-launch:
	@packaging/deps.sh launch
	@$(MAKE) --no-print-directory -s all $(PROGS)
	@$(MAKE) --no-print-directory -s SAN=1 all $(patsubst $(BUILD)/%,build/san/%,$(PROGS))
	@LAUNCH=1 tests/run.sh $(BUILD) build/san

# Debian packages (packaging/debian/).  dpkg-buildpackage wants debian/ at
# the top of the source tree, which is not where it lives here: the build
# runs on a copy of the tree (without build/ and .git) in
# build/deb/ferry-VERSION/, with packaging/debian copied in as debian/.
# The .deb files land in build/deb/.
DEB_DIR    := build/deb
DEB_SRC    := $(DEB_DIR)/ferry-$(VERSION)
deb:
	@packaging/deps.sh deb
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_SRC)
	tar -c --exclude=./build --exclude=./.git -f - . | tar -x -C $(DEB_SRC) -f -
	cp -r packaging/debian $(DEB_SRC)/debian
	cd $(DEB_SRC) && dpkg-buildpackage -us -uc -b >../build.log 2>&1 || { tail -40 ../build.log; exit 1; }
	@ls $(DEB_DIR)/*.deb

# The packages built and checked (tests/deb/check.sh): lintian and what
# the packages hold.  The summary counts as tests/run.sh does.
check-deb:
	@mkdir -p build
	@bash tests/deb/check.sh | tee build/deb-check.log; rc=$${PIPESTATUS[0]}; \
	tests/summary.sh build/deb-check.log; exit $$rc

# The packages on a Debian 12 booted with systemd as PID 1 in a QEMU VM
# (tests/system/): installed with apt, started, socket-activated, reloaded,
# restarted, watchdogged, stopped, scored, two nodes with a key.  At most 15
# minutes under TCG on 2 cores.  Counts as tests/run.sh does; every check
# is skipped without QEMU or mmdebstrap.
check-system:
	@packaging/deps.sh system
	@$(MAKE) --no-print-directory -s deb >/dev/null
	@$(MAKE) --no-print-directory -s all $(BUILD)/tests/ft_alltoall $(BUILD)/tests/ft_open
	@tests/system/run.sh $(BUILD) | tee build/system.log; rc=$${PIPESTATUS[0]}; \
	tests/summary.sh build/system.log; exit $$rc

FUZZ_SECONDS ?= 60
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZERS)
	@for f in $(FUZZERS); do \
		echo "== $$f"; mkdir -p $(BUILD)/corpus/$$(basename $$f); \
		$$f -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/corpus/$$(basename $$f) \
			$$(ls -d tests/fuzz/regressions/$$(basename $$f) 2>/dev/null) \
			$$([ $$(basename $$f) = fuzz_conf ] && echo conf) || exit 1; \
	done

demo: deps
	@$(MAKE) --no-print-directory -s all $(PROGS)
	@tests/demo.sh $(BUILD)

# --- install ---

# The unit's SystemCallFilter=: what ferryd's own filter allows (CALL) and
# what it needs before installing it (START), from the same list.
UNIT_SYSCALLS = $(shell sed -n 's/^\(CALL\|START\)(\([a-z0-9_]*\)).*/\2/p' daemon/core/sandbox.def | tr '\n' ' ' | sed 's/ $$//')

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/ferry
	install -m 755 $(BUILD)/ferryd $(DESTDIR)$(SBINDIR)/ferryd
	install -m 755 $(BUILD)/ferryctl $(DESTDIR)$(BINDIR)/ferryctl
	install -m 755 $(LIBSO) $(DESTDIR)$(LIBDIR)/
	ln -sf libferry.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libferry.so
	install -m 644 $(BUILD)/libferry.a $(DESTDIR)$(LIBDIR)/libferry.a
# libferry-mpi and libferry-mpich when this build has their MPI (HAVE_MPI,
# HAVE_MPICH: debian/rules turns both off), not whenever an earlier build
# left the file in $(BUILD)
ifneq ($(HAVE_MPI),)
	install -m 755 $(MPI_LIBSO) $(DESTDIR)$(LIBDIR)/
	ln -sf libferry-mpi.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(MPI_SONAME)
	ln -sf $(MPI_SONAME) $(DESTDIR)$(LIBDIR)/libferry-mpi.so
endif
ifneq ($(HAVE_MPICH),)
	install -m 755 $(MPICH_LIBSO) $(DESTDIR)$(LIBDIR)/
	ln -sf libferry-mpich.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(MPICH_SONAME)
	ln -sf $(MPICH_SONAME) $(DESTDIR)$(LIBDIR)/libferry-mpich.so
endif
	install -m 644 client/ferry.h $(DESTDIR)$(INCLUDEDIR)/ferry.h
	$(PCSUBST) > $(DESTDIR)$(LIBDIR)/pkgconfig/ferry.pc
	sed -e 's|@SBINDIR@|$(SBINDIR)|' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|' -e 's|@SYSCALLS@|$(UNIT_SYSCALLS)|' \
		packaging/ferryd.service > $(DESTDIR)$(UNITDIR)/ferryd.service
	install -m 644 packaging/ferryd.socket $(DESTDIR)$(UNITDIR)/ferryd.socket
	$(MAKE) --no-print-directory install-man
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/ferry/ferry.conf ]; then \
		echo "keeping existing $(DESTDIR)$(SYSCONFDIR)/ferry/ferry.conf"; \
	else \
		install -m 644 conf/ferry.conf $(DESTDIR)$(SYSCONFDIR)/ferry/ferry.conf; \
	fi

# The man pages (packaging/man/, plain roff).  A page of several functions
# names them all in its NAME line; each other name becomes a link to it.
MAN_PAGES   := $(wildcard packaging/man/*.[0-9])
man_aliases = sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/,//g;p;q}' $(1)

install-man:
	@for p in $(MAN_PAGES); do \
		b=$$(basename $$p); s=$${b##*.}; \
		install -d $(DESTDIR)$(MANDIR)/man$$s; \
		echo "install -m 644 $$p $(DESTDIR)$(MANDIR)/man$$s/$$b"; \
		install -m 644 $$p $(DESTDIR)$(MANDIR)/man$$s/$$b || exit 1; \
		[ $$s = 3 ] || continue; \
		for n in $$($(call man_aliases,$$p)); do \
			[ $$n.$$s = $$b ] || ln -sf $$b $(DESTDIR)$(MANDIR)/man$$s/$$n.$$s; \
		done; \
	done

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/ferryd $(DESTDIR)$(BINDIR)/ferryctl \
		$(DESTDIR)$(LIBDIR)/libferry.so* $(DESTDIR)$(LIBDIR)/libferry.a $(DESTDIR)$(LIBDIR)/libferry-mpi.so* \
		$(DESTDIR)$(LIBDIR)/libferry-mpich.so* \
		$(DESTDIR)$(INCLUDEDIR)/ferry.h $(DESTDIR)$(LIBDIR)/pkgconfig/ferry.pc \
		$(DESTDIR)$(UNITDIR)/ferryd.service $(DESTDIR)$(UNITDIR)/ferryd.socket
	@for p in $(MAN_PAGES); do \
		b=$$(basename $$p); s=$${b##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$$b; \
		[ $$s = 3 ] && for n in $$($(call man_aliases,$$p)); do rm -f $(DESTDIR)$(MANDIR)/man$$s/$$n.$$s; done; \
	done; true

clean:
	rm -rf build

-include $(shell find $(BUILD) -path $(BUILD)/rdma-vm -prune -o -name '*.d' -type f -print 2>/dev/null)
