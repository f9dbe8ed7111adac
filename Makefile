# paidb — PGXS build.  `make && make install`, then `make installcheck`
# against a running server; `bash test/run-tests.sh` runs every suite.

EXTENSION = paidb paidb_openpai
EXTVERSION = 0.3

MODULE_big = paidb
# Objects are listed explicitly: a stray file in src/ must not change the build.
OBJS = \
	src/paidb.o \
	src/cluster_config.o \
	src/placement.o \
	src/pkey_lookup.o \
	src/worker_launcher.o \
	src/worker_retention.o \
	src/snapshot_convert.o \
	src/job_list.o \
	src/guc.o \
	src/merge_patch.o \
	src/history.o \
	src/task_history.o \
	src/openpai_import.o \
	src/openpai_counts.o \
	src/openpai_tags.o \
	src/rewrite_guard.o \
	src/rewrite_perms.o \
	src/job_state.o \
	src/job_config.o \
	src/snapshot.o \
	src/snapshot_pack.o \
	src/write_merger.o \
	src/jsonb_util.o \
	src/json_scan.o \
	src/spi_plan.o \
	src/sync_signal.o \
	src/worker_shmem.o \
	src/worker_common.o \
	src/worker_sync.o \
	src/worker_watch.o \
	src/k8s_client.o \
	src/k8s_watch.o \
	src/k8s_objects.o \
	src/install_check.o

# Install scripts are listed explicitly (sql/ also holds the regression tests).
DATA = \
	sql/paidb--0.1.sql \
	sql/paidb--0.1--0.2.sql \
	sql/paidb--0.2--0.3.sql \
	sql/paidb_openpai--0.2.sql \
	sql/paidb_openpai--0.2--0.3.sql
PGFILEDESC = "paidb - OpenPAI jobs in PostgreSQL, synchronised with Kubernetes"

PG_CPPFLAGS = -I$(srcdir)/src $(shell pkg-config --cflags json-c libcurl zlib yaml-0.1 libzstd liblz4)
SHLIB_LINK = $(shell pkg-config --libs json-c libcurl zlib yaml-0.1 libzstd liblz4)
# -Wextra's unused-parameter fires on PostgreSQL's own headers and on
# callback signatures; everything else of -Wall -Wextra is on.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter

# pg_regress suites (sql/NAME.sql, expected/NAME.out); they need no preload.
REGRESS = init merge_patch history framework_state snapshot write_merger bad_input addons clusters \
	openpai_views openpai_task_history openpai_import life_cycle openpai_counts openpai_tags openpai_exact
REGRESS_OPTS = --inputdir=$(srcdir) --dbname=paidb_regression

# TAP tests (PostgreSQL::Test::Cluster + the fake API server) run with
# `make prove` as a non-root user, not from installcheck: installcheck stays
# the plain SQL suite that works against any running server.
PROVE_TESTS = test/t/*.pl

# `make fuzz` (below) links libFuzzer and test/fuzz/paidb_fuzz.c in
ifdef PAIDB_FUZZ
OBJS += test/fuzz/paidb_fuzz.o
PG_CPPFLAGS += -DPAIDB_FUZZING
SHLIB_LINK += -Wl,-Bsymbolic -Wl,--whole-archive \
	$(shell $(CC) -print-resource-dir)/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a \
	-Wl,--no-whole-archive -lstdc++ -lm -lpthread
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

.PHONY: bench bench-ha pgtap prove asan asan-install fuzz fuzz-install
# Benchmarks print their own figures and the figure each is compared with.
bench:
	bash test/bench/run-bench.sh

# Failover times of the last HA run beside its Patroni timings
# (PAIDB_HA_SWEEP=1, as root: measure them again for several timings).
bench-ha:
	bash test/ha/bench-ha.sh

pgtap:
	pg_prove --ext .sql -r test/pgtap

prove:
	PATH="$(bindir):$$PATH" PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
	  $(PROVE) -I '$(top_builddir)/src/test/perl' -I test/t/lib $(PROVE_TESTS)

# AddressSanitizer + UBSan build of paidb and the test module (without JIT
# bitcode), for test/suites/90_asan.sh: `make asan`, then `make asan-install
# DESTDIR=...` into a private PostgreSQL whose server preloads libasan.  It
# replaces the normal build in this tree (it starts with make clean).
SANITIZE = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan:
	$(MAKE) clean
	$(MAKE) -C test/modules/paidb_test clean
	$(MAKE) with_llvm=no COPT='$(SANITIZE)'
	$(MAKE) -C test/modules/paidb_test COPT='$(SANITIZE)'

asan-install:
	$(MAKE) with_llvm=no install
	$(MAKE) -C test/modules/paidb_test install

# libFuzzer build for test/suites/70_fuzz.sh: paidb.so compiled by clang with
# coverage, ASan and UBSan, with test/fuzz/paidb_fuzz.c and libFuzzer's
# runtime linked in; `make fuzz-install DESTDIR=...` puts it into
# a private PostgreSQL that preloads clang's ASan runtime.  Replaces the
# normal build in this tree.
FUZZ_CFLAGS = -O1 -g -fno-strict-aliasing -fwrapv -fno-omit-frame-pointer -Wall \
	-Wno-unused-command-line-argument -Wno-compound-token-split-by-macro -Wno-ignored-attributes \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
fuzz:
	$(MAKE) clean PAIDB_FUZZ=1
	$(MAKE) PAIDB_FUZZ=1 with_llvm=no CC=clang CFLAGS='$(FUZZ_CFLAGS)'

fuzz-install:
	$(MAKE) install PAIDB_FUZZ=1 with_llvm=no CC=clang CFLAGS='$(FUZZ_CFLAGS)'
