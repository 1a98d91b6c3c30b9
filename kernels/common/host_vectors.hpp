// The host's vector registers, as the ISA the build targets has them: the
// register blocks of the host tile products (common/team_tiles.hpp) and the
// FMA ceiling's probe (harness/ceiling.cpp) are sized by them, so that their
// sums stay in registers on AVX2 as on AVX-512.
#pragma once

namespace attn::host_vectors {

// An ISA's vector register file: `registers` registers of `bytes` each.
struct Isa {
  const char* name;
  int bytes, registers;
};
inline constexpr Isa avx512{"AVX-512", 64, 32}, avx2{"AVX2", 32, 16},
    sse2{"SSE2", 16, 16};  // x86-64's baseline
inline constexpr Isa every_isa[] = {avx512, avx2, sse2};

// A CUDA build (nvcc, both passes) keeps x86-64's baseline, as its host code
// does (CMakeLists.txt), so that the passes instantiate the same templates.
#if defined(__AVX512F__) && !defined(__CUDACC__)
inline constexpr Isa target = avx512;
#elif defined(__AVX__) && !defined(__CUDACC__)
inline constexpr Isa target = avx2;
#else
inline constexpr Isa target = sse2;
#endif
inline constexpr int bytes = target.bytes, registers = target.registers;
inline constexpr const char* isa = target.name;

// A host product's block of outputs held in registers: `rows` rows of
// `row_bytes` (two vector registers) each (common/team_tiles.hpp,
// host_product_block). Per inner step it broadcasts one left entry per row
// and takes the right operand's two vectors as memory operands of its FMAs,
// so the rows x 2 sums and a broadcast must fit the register file. With 32
// registers, 8 rows (16 sums) was the fastest of 4, 6 and 8 rows of 2 or 4
// vectors for the softmax and chunked forms at d = 64; with 16, 6 rows (12
// sums, enough to cover the FMA units' latency where 8 were not; the tiles'
// last rows as blocks of 4, 2 and 1).
struct ProductBlock {
  int rows, row_bytes;
};
constexpr ProductBlock product_block_of(const Isa& vectors) {
  return vectors.registers >= 32 ? ProductBlock{8, 2 * vectors.bytes}
                                 : ProductBlock{6, 2 * vectors.bytes};
}
inline constexpr ProductBlock product_block = product_block_of(target);

}  // namespace attn::host_vectors
