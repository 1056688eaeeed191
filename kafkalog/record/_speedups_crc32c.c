/*
 * The CRC-32C kernel (crc32c), and the CRC-32C the magic 2 kernels check batches with.
 */
#include "_speedups.h"

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of magic 2 batches: SSE4.2's crc32
 * instruction where the processor has it, else slicing-by-8 tables.
 *
 * One crc32 instruction waits for the one before it (3 cycles), but the processor can start one
 * every cycle: so a long buffer is taken in three streams at once, each over its own third of a
 * block, and the three registers are joined. Joining uses the CRC's linearity: the register
 * after A||B is (register after A) * x^(8*|B|) mod P, xor the register of B started from 0; the
 * multiplication by a fixed x^(8*L) is a table per byte of the register (shift_tables). */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc32c_table[8][256];
static int crc32c_hardware = 0;

static uint32_t crc32c_long_shift[4][256];
static uint32_t crc32c_short_shift[4][256];

/* a * b modulo the polynomial, both reflected (bit 31 is x^0) */
static uint32_t crc32c_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
        if (a & bit) product ^= b;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return product;
}

/* tables that multiply a register by x^(8 * length) (appending ``length`` zero bytes) */
static void crc32c_shift_tables(uint32_t tables[4][256], Py_ssize_t length) {
    uint32_t factor = 1u << 31; /* x^0 */
    for (Py_ssize_t i = 0; i < length; i++) /* times x^8 per zero byte */
        for (int k = 0; k < 8; k++) factor = factor & 1 ? (factor >> 1) ^ 0x82F63B78u : factor >> 1;
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 0; k < 4; k++) tables[k][i] = crc32c_multiply(factor, i << (8 * k));
}

static inline uint32_t crc32c_shift(uint32_t tables[4][256], uint32_t crc) {
    return tables[0][crc & 0xFF] ^ tables[1][(crc >> 8) & 0xFF] ^ tables[2][(crc >> 16) & 0xFF] ^ tables[3][crc >> 24];
}

void speedups_crc32c_init(void) {
    crc32c_shift_tables(crc32c_long_shift, CRC_LONG);
    crc32c_shift_tables(crc32c_short_shift, CRC_SHORT);
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8) ^ crc32c_table[0][crc32c_table[t - 1][i] & 0xFF];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc32c_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc32c_table[7][lo & 0xFF] ^ crc32c_table[6][(lo >> 8) & 0xFF] ^ crc32c_table[5][(lo >> 16) & 0xFF] ^
              crc32c_table[4][lo >> 24] ^ crc32c_table[3][hi & 0xFF] ^ crc32c_table[2][(hi >> 8) & 0xFF] ^
              crc32c_table[1][(hi >> 16) & 0xFF] ^ crc32c_table[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n-- > 0) crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static inline uint64_t crc32c_sse42_streams(
    uint64_t c, const unsigned char *p, Py_ssize_t block, uint32_t shift[4][256]) {
    uint64_t c1 = 0, c2 = 0;
    for (const unsigned char *end = p + block; p < end; p += 8) {
        uint64_t w0, w1, w2;
        memcpy(&w0, p, 8);
        memcpy(&w1, p + block, 8);
        memcpy(&w2, p + 2 * block, 8);
        c = __builtin_ia32_crc32di(c, w0);
        c1 = __builtin_ia32_crc32di(c1, w1);
        c2 = __builtin_ia32_crc32di(c2, w2);
    }
    return crc32c_shift(shift, crc32c_shift(shift, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, Py_ssize_t n) {
    uint64_t c = crc;
    for (; n >= 3 * CRC_LONG; p += 3 * CRC_LONG, n -= 3 * CRC_LONG)
        c = crc32c_sse42_streams(c, p, CRC_LONG, crc32c_long_shift);
    for (; n >= 3 * CRC_SHORT; p += 3 * CRC_SHORT, n -= 3 * CRC_SHORT)
        c = crc32c_sse42_streams(c, p, CRC_SHORT, crc32c_short_shift);
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8; n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t speedups_crc32c_of(const unsigned char *p, Py_ssize_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc32c_hardware) return crc32c_sse42(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc32c_software(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* crc32c(data) -> int: the CRC-32C of a bytes-like object. */
PyObject *speedups_py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uint32_t crc;
    if (view.len < (1 << 20)) {
        /* under a megabyte the CRC takes microseconds: giving the GIL away would cost more, for
           taking it back waits for another busy thread's switch interval (5 ms) */
        crc = speedups_crc32c_of((const unsigned char *)view.buf, view.len);
    } else {
        Py_BEGIN_ALLOW_THREADS
        crc = speedups_crc32c_of((const unsigned char *)view.buf, view.len);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}
