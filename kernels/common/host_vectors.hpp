// The host's vector registers, as the ISA the build targets has them: the
// register blocks of the host tile products (common/team_tiles.hpp) and the
// FMA ceiling's probe (harness/ceiling.cpp) are sized by them, so that their
// sums stay in registers on AVX2 as on AVX-512.
#pragma once

namespace attn::host_vectors {

// A CUDA build (nvcc, both passes) keeps x86-64's baseline, as its host code
// does (CMakeLists.txt), so that the passes instantiate the same templates.
#if defined(__AVX512F__) && !defined(__CUDACC__)
inline constexpr int bytes = 64, registers = 32;  // zmm0-31
inline constexpr const char* isa = "AVX-512";
#elif defined(__AVX__) && !defined(__CUDACC__)
inline constexpr int bytes = 32, registers = 16;  // ymm0-15
inline constexpr const char* isa = "AVX2";
#else
inline constexpr int bytes = 16, registers = 16;  // xmm0-15, x86-64's baseline
inline constexpr const char* isa = "SSE2";
#endif

// A host product's block of outputs held in registers: `rows` rows of
// `row_bytes` (two vector registers) each. Per inner step it loads a row's
// worth of the right operand and broadcasts one left entry per row, so the
// rows x 2 sums, the two loaded vectors and a broadcast must fit the register
// file. With 32 registers, 8 rows (16 sums) was the fastest of 4, 6 and 8 rows
// of 2 or 4 vectors for the softmax and chunked forms at d = 64; with 16, 4
// rows (8 sums: one per FMA unit and cycle of latency), where 6 leave edge
// rows of the 64- and 128-row tiles to the plain dot products.
struct ProductBlock {
  int rows, row_bytes;
};
inline constexpr ProductBlock product_block =
    registers >= 32 ? ProductBlock{8, 2 * bytes} : ProductBlock{4, 2 * bytes};

}  // namespace attn::host_vectors
