/* amx_emu.h - the AMX tile instructions emulated on a CPU without them, for
 * the tests: so that the AMX tier's kernels are checked against the other
 * tiers, bit for bit, on every x86-64 machine with AVX-512 VBMI (the tier's
 * other instructions), not only on the Xeons that have the tiles.
 *
 * A SIGILL handler decodes the faulting instruction; when it is one the
 * tier uses (ldtilecfg, sttilecfg, tilerelease, tilezero, tileloadd(t1),
 * tilestored, tdpbssd/tdpbsud/tdpbusd/tdpbuud), it carries it out on this
 * thread's emulated tile registers, as Intel's SDM describes it (rows and
 * bytes past the configuration zeroed, int32 sums wrapping), and resumes
 * after it. A configuration or operand shape the hardware would fault on is
 * reported and aborts, so a kernel bug that real tiles would catch is caught
 * here too. Anything else re-raises the SIGILL. About a microsecond or more
 * an instruction (a signal each): for the tests' small shapes only.
 *
 * amx_emu_install() installs the handler for the process and tells the
 * library the CPU has AMX (rw_cpu__assume_amx); x86-64 Linux only. */
#ifndef REWIND_TESTS_AMX_EMU_H
#define REWIND_TESTS_AMX_EMU_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__linux__)
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "kernels/matmul_int.h"

typedef struct {
    uint8_t cfg[64];         /* as ldtilecfg read it; all zero: unconfigured */
    uint8_t tile[8][16][64]; /* tmm0..tmm7, 16 rows of 64 bytes */
} amx_emu_regs;

static _Thread_local amx_emu_regs amx_emu_r; /* each thread its own tiles, as the hardware */
static atomic_long amx_emu_executed;         /* instructions emulated, all threads */

static int amx_emu_rows(int t) { return amx_emu_r.cfg[48 + t]; }
static int amx_emu_colsb(int t) { return amx_emu_r.cfg[16 + 2 * t] | amx_emu_r.cfg[17 + 2 * t] << 8; }

/* async-signal-safe report, then abort */
static void amx_emu_die(const char *why, const uint8_t *ip) {
    static const char hex[] = "0123456789abcdef";
    char line[160];
    size_t n = 0;
    for (const char *s = "amx_emu: "; *s;) line[n++] = *s++;
    while (*why && n < 100) line[n++] = *why++;
    for (const char *s = " at bytes"; *s;) line[n++] = *s++;
    for (int i = 0; i < 8; i++) line[n++] = ' ', line[n++] = hex[ip[i] >> 4], line[n++] = hex[ip[i] & 15];
    line[n++] = '\n';
    if (write(2, line, n) < 0) { /* nothing more to do */
    }
    abort();
}

/* The general registers in the order of their encoding (rax, rcx, ...). */
static greg_t *amx_emu_gpr(ucontext_t *uc, int r) {
    static const int map[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                                REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
    return &uc->uc_mcontext.gregs[map[r]];
}

/* A tile's shape must fit palette 1 (16 rows of 64 bytes). */
static bool amx_emu_cfg_ok(const uint8_t *c) {
    if (c[0] == 0) return true;
    if (c[0] != 1 || c[1] != 0) return false;
    for (int i = 2; i < 16; i++)
        if (c[i]) return false;
    for (int t = 0; t < 8; t++) {
        const int colsb = c[16 + 2 * t] | c[17 + 2 * t] << 8, rows = c[48 + t];
        if (colsb > 64 || rows > 16 || (colsb == 0) != (rows == 0) || (colsb & 3)) return false;
    }
    return true;
}

/* dst += a . b over groups of 4 bytes; asg/bsg: a's / b's bytes signed */
static bool amx_emu_dot(int d, int a, int b, bool asg, bool bsg) {
    const int M = amx_emu_rows(d), N = amx_emu_colsb(d) / 4, K = amx_emu_colsb(a) / 4;
    if (!M || M != amx_emu_rows(a) || amx_emu_colsb(d) != amx_emu_colsb(b) || K != amx_emu_rows(b) || d == a ||
        d == b || a == b)
        return false;
    for (int m = 0; m < M; m++) {
        uint32_t acc[16];
        memcpy(acc, amx_emu_r.tile[d][m], sizeof acc);
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                for (int i = 0; i < 4; i++) {
                    const uint8_t ab = amx_emu_r.tile[a][m][4 * k + i], bb = amx_emu_r.tile[b][k][4 * n + i];
                    const int32_t av = asg ? (int8_t)ab : ab, bv = bsg ? (int8_t)bb : bb;
                    acc[n] += (uint32_t)(av * bv);
                }
        memset(amx_emu_r.tile[d][m], 0, 64);
        memcpy(amx_emu_r.tile[d][m], acc, (size_t)N * 4);
    }
    memset(amx_emu_r.tile[d][M], 0, (size_t)(16 - M) * 64);
    return true;
}

static void amx_emu_sigill(int sig, siginfo_t *si, void *ucv) {
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    const uint8_t *ip = (const uint8_t *)uc->uc_mcontext.gregs[REG_RIP];
    /* VEX3, map 0F38, W0, L0 */
    if (ip[0] != 0xC4 || (ip[1] & 0x1F) != 2 || (ip[2] & 0x84) != 0) goto other;
    const int R = !(ip[1] & 0x80), X = !(ip[1] & 0x40), B = !(ip[1] & 0x20);
    const int vvvv = (~ip[2] >> 3) & 15, pp = ip[2] & 3, op = ip[3], modrm = ip[4];
    const int mod = modrm >> 6, reg = (modrm >> 3 & 7) | R << 3, rm = (modrm & 7) | B << 3;
    const uint8_t *q = ip + 5;
    uint8_t *mem = NULL;
    int64_t stride = 0;
    if (mod != 3) {
        int64_t base = 0, disp = 0;
        bool rip_rel = false;
        if ((modrm & 7) == 4) {
            const int sib = *q++, idx = (sib >> 3 & 7) | X << 3, b = (sib & 7) | B << 3;
            if (idx != 4) stride = (int64_t)*amx_emu_gpr(uc, idx) << (sib >> 6);
            if ((sib & 7) == 5 && mod == 0)
                disp = (int32_t)(q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24), q += 4;
            else base = *amx_emu_gpr(uc, b);
        } else if ((modrm & 7) == 5 && mod == 0) {
            rip_rel = true;
            disp = (int32_t)(q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24), q += 4;
        } else {
            base = *amx_emu_gpr(uc, rm);
        }
        if (mod == 1) disp = (int8_t)*q++;
        else if (mod == 2) disp = (int32_t)(q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24), q += 4;
        mem = (uint8_t *)(intptr_t)((rip_rel ? (int64_t)(intptr_t)q : base) + disp);
    }
    if (op == 0x49 && mod != 3 && pp == 0 && vvvv == 0) { /* ldtilecfg m512 */
        if (!amx_emu_cfg_ok(mem)) amx_emu_die("ldtilecfg of a configuration palette 1 refuses", ip);
        memset(&amx_emu_r, 0, sizeof amx_emu_r);
        if (mem[0]) memcpy(amx_emu_r.cfg, mem, 64);
    } else if (op == 0x49 && mod != 3 && pp == 1 && vvvv == 0) { /* sttilecfg m512 */
        memcpy(mem, amx_emu_r.cfg, 64);
    } else if (op == 0x49 && modrm == 0xC0 && pp == 0 && vvvv == 0) { /* tilerelease */
        memset(&amx_emu_r, 0, sizeof amx_emu_r);
    } else if (op == 0x49 && mod == 3 && pp == 3 && vvvv == 0 && (modrm & 7) == 0 && reg < 8) { /* tilezero */
        if (!amx_emu_r.cfg[0]) amx_emu_die("tilezero without a configuration", ip);
        memset(amx_emu_r.tile[reg], 0, sizeof amx_emu_r.tile[reg]);
    } else if (op == 0x4B && mod != 3 && (modrm & 7) == 4 && vvvv == 0 && reg < 8 && pp != 0) {
        const int rows = amx_emu_rows(reg), colsb = amx_emu_colsb(reg);
        if (!amx_emu_r.cfg[0] || !rows) amx_emu_die("tile load or store of an unconfigured tile", ip);
        if (pp == 2) { /* tilestored sibmem, tmm */
            for (int r = 0; r < rows; r++) memcpy(mem + r * stride, amx_emu_r.tile[reg][r], (size_t)colsb);
        } else { /* tileloadd / tileloaddt1 tmm, sibmem */
            memset(amx_emu_r.tile[reg], 0, sizeof amx_emu_r.tile[reg]);
            for (int r = 0; r < rows; r++) memcpy(amx_emu_r.tile[reg][r], mem + r * stride, (size_t)colsb);
        }
    } else if (op == 0x5E && mod == 3 && reg < 8 && rm < 8 && vvvv < 8) { /* tdpb[su][su]d tmm, tmm, tmm */
        if (!amx_emu_r.cfg[0]) amx_emu_die("tile product without a configuration", ip);
        /* pp: F2 ss, F3 su, 66 us, none uu (a's bytes, b's bytes) */
        if (!amx_emu_dot(reg, rm, vvvv, pp >= 2, pp == 3 || pp == 1))
            amx_emu_die("tile product of shapes that do not fit", ip);
    } else {
        goto other;
    }
    atomic_fetch_add_explicit(&amx_emu_executed, 1, memory_order_relaxed);
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(intptr_t)q;
    return;
other: /* not ours: the default action on the same instruction */
    signal(SIGILL, SIG_DFL);
}

/* Installs the emulation (see the head); false where it cannot run here. */
static inline bool amx_emu_install(void) {
    if (!rw_cpu_has_avx512() || !__builtin_cpu_supports("avx512vbmi")) return false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = amx_emu_sigill;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGILL, &sa, NULL)) return false;
    rw_cpu__assume_amx();
    return true;
}
#else
static inline bool amx_emu_install(void) { return false; }
static long amx_emu_executed;
#endif

#endif
