# rewind - the one build entry point.
#
#   make          build build/rewind, build/librewind.a and build/librewind.so
#                 (optimised, -Werror)
#   make test     build, then run every test in the normal build and again
#                 under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo     install missing Debian packages, build, run the demo
#   make demo-cluster  the same with 3 replicas behind nginx (scripts/cluster.sh)
#   make bench    run the benchmarks (see README)
#   make bench-compare LLAMA_BENCH=path/to/llama-bench
#                 rewind and llama.cpp side by side (scripts/bench_vs_llama.sh)
#   make soak     the server under mixed traffic for SOAK_MINUTES (scripts/soak.sh)
#   make attack   the adversarial corpus (tests/attack/) against the normal and
#                 sanitizer builds, 64 clients (scripts/attack.sh)
#   make fuzz     build the libFuzzer harnesses (clang) into build-fuzz/
#   make fuzz-ci  replay the fuzz corpora and fuzz each harness briefly
#   make format   clang-format every source file in place
#
# Sources are found by wildcard: every src/<module>/*.c (and one level
# below) goes into librewind.a, the engine library, except src/cli, which
# makes the binary together with bench/ (the `rewind bench` commands) and
# tools/ (the demo client and the loopback HTTP client, which the tests link
# too), and the programs' own modules src/server (the HTTP server) and
# src/synth (the model synthesizer), which go into librewind-app.a, linked
# by the binary and the tests but never installed: an embedder's librewind
# needs no HTTP library. The library is compiled with hidden visibility:
# only the functions include/rewind.h marks RW_API are exported.
# Files named *_avx2.c, *_avx512.c and *_amx.c are compiled with those ISA
# flags only, and only for x86-64 (so one binary runs on any x86-64 and picks
# the best kernels at run time); files named *_neon.c only for AArch64, with
# the dot-product extension (chosen at run time too). Other targets build the
# portable files alone (the reference kernels).
#
#   make test-aarch64  cross-compile for AArch64 into build-aarch64/ and run
#                 the kernel, fixture and invariance tests under qemu-aarch64
#                 with the NEON tier (scripts/test-aarch64.sh)

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
CFLAGS_BASE := -std=c17 -g $(OPT) -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
               -Wno-format-truncation -D_GNU_SOURCE -pthread -Iinclude -Isrc -I. -Itests -MMD -MP $(SAN)
PKG_CONFIG ?= pkg-config
LIBDEPS := jansson libpcre2-8
LIB_LDLIBS := -lm -pthread $(shell $(PKG_CONFIG) --libs $(LIBDEPS) 2>/dev/null) -lunistring
LDLIBS  := $(LIB_LDLIBS) $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null)
# The target's architecture (x86_64, aarch64, ...), from the compiler.
ARCH    := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
X86_ISA_SRC := %_avx2.c %_avx512.c %_amx.c
ARM_ISA_SRC := %_neon.c
ifeq ($(ARCH),x86_64)
ISA_OUT := $(ARM_ISA_SRC)
else ifeq ($(ARCH),aarch64)
ISA_OUT := $(X86_ISA_SRC)
else ifeq ($(ARCH),arm64)
ISA_OUT := $(X86_ISA_SRC)
else
ISA_OUT := $(X86_ISA_SRC) $(ARM_ISA_SRC)
endif

# LIB_MODULES narrows the library to some folders (the fuzz build uses it).
APP_MODULES := server synth
LIB_MODULES ?= $(filter-out cli $(APP_MODULES),$(notdir $(wildcard src/*)))
LIB_SRC := $(filter-out $(ISA_OUT),$(foreach m,$(LIB_MODULES),$(wildcard src/$(m)/*.c src/$(m)/*/*.c)))
APP_SRC := $(filter-out $(ISA_OUT),$(foreach m,$(APP_MODULES),$(wildcard src/$(m)/*.c)))
CLI_SRC := $(wildcard src/cli/*.c bench/*.c tools/*.c)
TEST_SRC := $(wildcard tests/*/test_*.c)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
APP_OBJ := $(APP_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/harness.o

ISA_AVX2   := -mavx2 -mfma -mf16c
ISA_AVX512 := $(ISA_AVX2) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
ISA_AMX    := $(ISA_AVX512) -mavx512vbmi -mamx-tile -mamx-int8 -mamx-bf16
ISA_NEON   := -march=armv8.2-a+dotprod

.PHONY: all test test-aarch64 test-fast test-asan demo demo-cluster bench bench-compare soak attack fuzz fuzz-ci format clean setup install install-lib
all: $(BUILD)/rewind $(BUILD)/librewind.a $(BUILD)/librewind.so $(TEST_BIN)

$(BUILD)/librewind.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/librewind-app.a: $(APP_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/rewind: $(CLI_OBJ) $(BUILD)/librewind-app.a $(BUILD)/librewind.a
	$(CC) $(CFLAGS_BASE) -o $@ $(CLI_OBJ) $(BUILD)/librewind-app.a $(BUILD)/librewind.a $(LDLIBS)

# Tests link the loopback HTTP client of tools/ and the programs' modules
# (server, synth) too (neither is in the library).
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/obj/tests/harness.o $(BUILD)/obj/tools/http_client.o \
                  $(BUILD)/librewind-app.a $(BUILD)/librewind.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -o $@ $< $(BUILD)/obj/tests/harness.o $(BUILD)/obj/tools/http_client.o \
	  $(BUILD)/librewind-app.a $(BUILD)/librewind.a $(LDLIBS)

$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(ISA_AVX2) -c -o $@ $<
$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(ISA_AVX512) -c -o $@ $<
$(BUILD)/obj/%_amx.o: %_amx.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(ISA_AMX) -c -o $@ $<
# GCC 12's AArch64 vectorizer stops with an internal error on one test
# (tests/models/test_models_reference.c); the tests need no vectorizing.
ifneq ($(filter aarch64 arm64,$(ARCH)),)
$(BUILD)/obj/tests/%.o: CFLAGS_BASE += -fno-tree-vectorize
endif
$(BUILD)/obj/%_neon.o: %_neon.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(ISA_NEON) -c -o $@ $<
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -c -o $@ $<

# ---- install ------------------------------------------------------------
# make install PREFIX=DIR: include/rewind.h, librewind.a, librewind.so (with
# a soname), rewind.pc and the rewind binary. The installed libraries
# export exactly the header's functions (those marked RW_API, listed into
# $(BUILD)/rewind.syms): the archive is one prelinked object whose other
# globals are made local (objcopy), the shared library is built with hidden
# visibility and a version script naming them.
PREFIX  ?= /usr/local
VERSION := $(shell sed -n 's/^\#define RW_VERSION_STRING "\(.*\)"/\1/p' include/rewind.h)
SOMAJOR := 0

$(BUILD)/rewind.syms: include/rewind.h
	@mkdir -p $(@D)
	sed -n 's/^RW_API [^(]*[ *]\(rw_[a-z0-9_]*\)(.*/\1/p' $< > $@

$(BUILD)/rewind.map: $(BUILD)/rewind.syms
	{ echo '{ global:'; sed 's/$$/;/' $<; echo 'local: *; };'; } > $@

$(BUILD)/install/librewind.a: $(LIB_OBJ) $(BUILD)/rewind.syms
	@mkdir -p $(@D)
	$(LD) -r -o $(BUILD)/install/rewind.o $(LIB_OBJ)
	objcopy --keep-global-symbols=$(BUILD)/rewind.syms $(BUILD)/install/rewind.o
	rm -f $@ && ar rcs $@ $(BUILD)/install/rewind.o

$(BUILD)/install/librewind.so.$(VERSION): $(LIB_OBJ) $(BUILD)/rewind.map
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -shared -Wl,-soname,librewind.so.$(SOMAJOR) -Wl,--version-script=$(BUILD)/rewind.map \
	  -o $@ $(LIB_OBJ) $(LIB_LDLIBS)

# The shared library in the build folder too (the Python bindings' tests load
# it): a link to the one make install installs.
$(BUILD)/librewind.so: $(BUILD)/install/librewind.so.$(VERSION)
	ln -sf install/librewind.so.$(VERSION) $@

install-lib: $(BUILD)/install/librewind.a $(BUILD)/install/librewind.so.$(VERSION)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/rewind.h $(DESTDIR)$(PREFIX)/include/rewind.h
	install -m 644 $(BUILD)/install/librewind.a $(DESTDIR)$(PREFIX)/lib/librewind.a
	install -m 755 $(BUILD)/install/librewind.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf librewind.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/librewind.so.$(SOMAJOR)
	ln -sf librewind.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/librewind.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(LIBDEPS)|' \
	  lib/rewind.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/rewind.pc

install: all install-lib
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/rewind $(DESTDIR)$(PREFIX)/bin/rewind

# The sanitizer build: same sources, own folder, -O1 so it stays quick.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

test: setup-check
	$(MAKE) -j2 all
	$(MAKE) -j2 all BUILD=build-asan OPT=-O1 SAN="$(SAN_FLAGS)"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  scripts/run-tests.sh build build-asan

# AArch64 under emulation (scripts/test-aarch64.sh: the packages, the
# cross build in build-aarch64/, the tests that prove the NEON tier).
test-aarch64:
	scripts/test-aarch64.sh

# Only the normal build's tests (quicker while developing).
test-fast: all
	scripts/run-tests.sh build

demo: setup
	$(MAKE) -j2 all
	scripts/demo.sh

demo-cluster: setup
	$(MAKE) -j2 all
	scripts/cluster.sh demo

bench: all
	scripts/bench.sh

# LLAMA_BENCH must name a llama-bench binary (a measuring instrument only)
bench-compare: all
	LLAMA_BENCH="$(LLAMA_BENCH)" scripts/bench_vs_llama.sh
# The server for SOAK_MINUTES under mixed traffic (scripts/soak.sh): RSS over
# time, outcomes, p50/p99. Not part of make test.
SOAK_MINUTES ?= 5
SOAK_CLIENTS ?= 8
SOAK_MODEL ?= $(or $(RW_FIXTURES),../shared/fixtures)/qwen35/qwen35-Q8_0.gguf
soak: all
	scripts/soak.sh --minutes $(SOAK_MINUTES) --clients $(SOAK_CLIENTS) --model $(SOAK_MODEL)

# The adversarial corpus against both builds (loopback only, stops by itself).
attack: all
	$(MAKE) -j2 all BUILD=build-asan OPT=-O1 SAN="$(SAN_FLAGS)"
	scripts/attack.sh --build build --build build-asan

setup:
	scripts/setup.sh

# make test needs the same packages; setup.sh is a no-op when all are present.
setup-check:
	@scripts/setup.sh --quiet

fuzz:
	scripts/fuzz.sh build

fuzz-ci:
	scripts/fuzz.sh ci

# clang-format (.clang-format) on the C files changed in the working tree,
# or on FILES="..."; the existing code was formatted by hand close to that
# style, and reformatting all of it would only churn.
FILES ?= $(shell git diff --name-only HEAD -- '*.c' '*.h' 2>/dev/null; \
                 git ls-files --others --exclude-standard -- '*.c' '*.h' 2>/dev/null)
format:
	@if [ -n "$(strip $(FILES))" ]; then clang-format -i $(FILES); else echo "format: no changed C files"; fi

clean:
	rm -rf build build-asan build-fuzz build-aarch64

# header dependencies of every build folder (build-fuzz too: a changed private
# header must rebuild the fuzz library as well)
-include $(shell find $(sort build build-asan $(BUILD)) -name '*.d' 2>/dev/null)
