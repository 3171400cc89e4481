// IRON design: GEMM(M=16, K=2048, N=128256, b_transposed=True, precision=<Precision.HIGHEST: 'highest'>, effective_precision=<Precision.HIGHEST: 'highest'>, num_aie_columns=4, tile_m=16, tile_k=128, tile_n=64, out_depth=2) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @gemm_f32_zero(memref<16x64xf32>, i32, i32) attributes {link_with = "gemm.o"}
    func.func private @gemm_bf16_acc_bt(memref<16x128xbf16>, memref<64x128xbf16>, memref<16x64xf32>, i32, i32, i32) attributes {link_with = "gemm.o"}
    func.func private @gemm_bf16_store(memref<16x64xf32>, memref<16x64xbf16>, i32, i32) attributes {link_with = "gemm.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    %mem_tile_1_1 = aie.tile(1, 1)
    %mem_tile_2_1 = aie.tile(2, 1)
    %mem_tile_3_1 = aie.tile(3, 1)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    aie.objectfifo @a_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo @a_row0(%mem_tile_0_1 dimensionsToStream [<size = 4, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_0_2, %tile_1_2, %tile_2_2, %tile_3_2}, 2 : i32) : !aie.objectfifo<memref<16x128xbf16>>
    aie.objectfifo.link [@a_0] -> [@a_row0] ([] [])
    aie.objectfifo @b_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @b_col0(%mem_tile_0_1 dimensionsToStream [<size = 16, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<64x128xbf16>>
    aie.objectfifo.link [@b_0] -> [@b_col0] ([] [])
    aie.objectfifo @c_0_0(%tile_0_2, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_0_0] -> [@out_0] ([] [])
    aie.objectfifo @b_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @b_col1(%mem_tile_1_1 dimensionsToStream [<size = 16, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<64x128xbf16>>
    aie.objectfifo.link [@b_1] -> [@b_col1] ([] [])
    aie.objectfifo @c_1_0(%tile_1_2, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_1(%mem_tile_1_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_1_0] -> [@out_1] ([] [])
    aie.objectfifo @b_2(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @b_col2(%mem_tile_2_1 dimensionsToStream [<size = 16, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<64x128xbf16>>
    aie.objectfifo.link [@b_2] -> [@b_col2] ([] [])
    aie.objectfifo @c_2_0(%tile_2_2, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_2(%mem_tile_2_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_2_0] -> [@out_2] ([] [])
    aie.objectfifo @b_3(%shim_noc_tile_3_0, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @b_col3(%mem_tile_3_1 dimensionsToStream [<size = 16, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<64x128xbf16>>
    aie.objectfifo.link [@b_3] -> [@b_col3] ([] [])
    aie.objectfifo @c_3_0(%tile_3_2, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_3(%mem_tile_3_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_3_0] -> [@out_3] ([] [])
    %acc_0_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0_0"} : memref<16x64xf32>
    %acc_1_0 = aie.buffer(%tile_1_2) {sym_name = "acc_1_0"} : memref<16x64xf32>
    %acc_2_0 = aie.buffer(%tile_2_2) {sym_name = "acc_2_0"} : memref<16x64xf32>
    %acc_3_0 = aie.buffer(%tile_3_2) {sym_name = "acc_3_0"} : memref<16x64xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c501 = arith.constant 501 : index
      %c16 = arith.constant 16 : index
      %c16_i32 = arith.constant 16 : i32
      %c128_i32 = arith.constant 128 : i32
      %c64_i32 = arith.constant 64 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c501 step %c1 {
          func.call @gemm_f32_zero(%acc_0_0, %c16_i32, %c64_i32) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k = %c0 to %c16 step %c1 {
            %a_view = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a = aie.objectfifo.subview.access %a_view[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %b_view = aie.objectfifo.acquire @b_col0(Consume, 1) : !aie.objectfifosubview<memref<64x128xbf16>>
            %b = aie.objectfifo.subview.access %b_view[0] : !aie.objectfifosubview<memref<64x128xbf16>> -> memref<64x128xbf16>
            func.call @gemm_bf16_acc_bt(%a, %b, %acc_0_0, %c16_i32, %c128_i32, %c64_i32) : (memref<16x128xbf16>, memref<64x128xbf16>, memref<16x64xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @b_col0(Consume, 1)
          }
          %c_view = aie.objectfifo.acquire @c_0_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c = aie.objectfifo.subview.access %c_view[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @gemm_bf16_store(%acc_0_0, %c, %c16_i32, %c64_i32) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_0_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c501_1 = arith.constant 501 : index
      %c16_1 = arith.constant 16 : index
      %c16_i32_1 = arith.constant 16 : i32
      %c128_i32_1 = arith.constant 128 : i32
      %c64_i32_1 = arith.constant 64 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %t_1 = %c0_1 to %c501_1 step %c1_1 {
          func.call @gemm_f32_zero(%acc_1_0, %c16_i32_1, %c64_i32_1) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_1 = %c0_1 to %c16_1 step %c1_1 {
            %a_view_1 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_1 = aie.objectfifo.subview.access %a_view_1[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %b_view_1 = aie.objectfifo.acquire @b_col1(Consume, 1) : !aie.objectfifosubview<memref<64x128xbf16>>
            %b_1 = aie.objectfifo.subview.access %b_view_1[0] : !aie.objectfifosubview<memref<64x128xbf16>> -> memref<64x128xbf16>
            func.call @gemm_bf16_acc_bt(%a_1, %b_1, %acc_1_0, %c16_i32_1, %c128_i32_1, %c64_i32_1) : (memref<16x128xbf16>, memref<64x128xbf16>, memref<16x64xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @b_col1(Consume, 1)
          }
          %c_view_1 = aie.objectfifo.acquire @c_1_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_1 = aie.objectfifo.subview.access %c_view_1[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @gemm_bf16_store(%acc_1_0, %c_1, %c16_i32_1, %c64_i32_1) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_1_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c501_2 = arith.constant 501 : index
      %c16_2 = arith.constant 16 : index
      %c16_i32_2 = arith.constant 16 : i32
      %c128_i32_2 = arith.constant 128 : i32
      %c64_i32_2 = arith.constant 64 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %t_2 = %c0_2 to %c501_2 step %c1_2 {
          func.call @gemm_f32_zero(%acc_2_0, %c16_i32_2, %c64_i32_2) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_2 = %c0_2 to %c16_2 step %c1_2 {
            %a_view_2 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_2 = aie.objectfifo.subview.access %a_view_2[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %b_view_2 = aie.objectfifo.acquire @b_col2(Consume, 1) : !aie.objectfifosubview<memref<64x128xbf16>>
            %b_2 = aie.objectfifo.subview.access %b_view_2[0] : !aie.objectfifosubview<memref<64x128xbf16>> -> memref<64x128xbf16>
            func.call @gemm_bf16_acc_bt(%a_2, %b_2, %acc_2_0, %c16_i32_2, %c128_i32_2, %c64_i32_2) : (memref<16x128xbf16>, memref<64x128xbf16>, memref<16x64xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @b_col2(Consume, 1)
          }
          %c_view_2 = aie.objectfifo.acquire @c_2_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_2 = aie.objectfifo.subview.access %c_view_2[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @gemm_bf16_store(%acc_2_0, %c_2, %c16_i32_2, %c64_i32_2) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_2_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c501_3 = arith.constant 501 : index
      %c16_3 = arith.constant 16 : index
      %c16_i32_3 = arith.constant 16 : i32
      %c128_i32_3 = arith.constant 128 : i32
      %c64_i32_3 = arith.constant 64 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %t_3 = %c0_3 to %c501_3 step %c1_3 {
          func.call @gemm_f32_zero(%acc_3_0, %c16_i32_3, %c64_i32_3) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_3 = %c0_3 to %c16_3 step %c1_3 {
            %a_view_3 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_3 = aie.objectfifo.subview.access %a_view_3[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %b_view_3 = aie.objectfifo.acquire @b_col3(Consume, 1) : !aie.objectfifosubview<memref<64x128xbf16>>
            %b_3 = aie.objectfifo.subview.access %b_view_3[0] : !aie.objectfifosubview<memref<64x128xbf16>> -> memref<64x128xbf16>
            func.call @gemm_bf16_acc_bt(%a_3, %b_3, %acc_3_0, %c16_i32_3, %c128_i32_3, %c64_i32_3) : (memref<16x128xbf16>, memref<64x128xbf16>, memref<16x64xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @b_col3(Consume, 1)
          }
          %c_view_3 = aie.objectfifo.acquire @c_3_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_3 = aie.objectfifo.subview.access %c_view_3[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @gemm_bf16_store(%acc_3_0, %c_3, %c16_i32_3, %c64_i32_3) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_3_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%a_buf: memref<32768xbf16>, %b_buf: memref<262668288xbf16>, %out_buf: memref<2052096xbf16>) {
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][64, 16, 16, 128][0, 128, 2048, 1]) {id = 0 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][62, 16, 16, 128][0, 128, 2048, 1]) {id = 1 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 0][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 2 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 33554432][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 3 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 126, 16, 64][0, 256, 128256, 1]) {id = 4 : i64, issue_token = true, metadata = @out_0} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 131072][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 0 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 33685504][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 1 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64][1, 126, 16, 64][0, 256, 128256, 1]) {id = 2 : i64, issue_token = true, metadata = @out_1} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 262144][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 0 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 33816576][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 1 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 128][1, 126, 16, 64][0, 256, 128256, 1]) {id = 2 : i64, issue_token = true, metadata = @out_2} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 393216][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 0 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 33947648][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 1 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 192][1, 126, 16, 64][0, 256, 128256, 1]) {id = 2 : i64, issue_token = true, metadata = @out_3} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][64, 16, 16, 128][0, 128, 2048, 1]) {id = 8 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][62, 16, 16, 128][0, 128, 2048, 1]) {id = 9 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 66060288][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 10 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 99614720][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 11 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32256][1, 126, 16, 64][0, 256, 128256, 1]) {id = 12 : i64, issue_token = true, metadata = @out_0} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 66191360][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 8 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 99745792][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 9 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32320][1, 126, 16, 64][0, 256, 128256, 1]) {id = 10 : i64, issue_token = true, metadata = @out_1} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 66322432][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 8 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 99876864][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 9 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32384][1, 126, 16, 64][0, 256, 128256, 1]) {id = 10 : i64, issue_token = true, metadata = @out_2} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 66453504][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 8 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 100007936][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 9 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32448][1, 126, 16, 64][0, 256, 128256, 1]) {id = 10 : i64, issue_token = true, metadata = @out_3} : memref<2052096xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][64, 16, 16, 128][0, 128, 2048, 1]) {id = 0 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][62, 16, 16, 128][0, 128, 2048, 1]) {id = 1 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 132120576][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 2 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 165675008][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 3 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64512][1, 126, 16, 64][0, 256, 128256, 1]) {id = 4 : i64, issue_token = true, metadata = @out_0} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 132251648][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 0 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 165806080][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 1 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64576][1, 126, 16, 64][0, 256, 128256, 1]) {id = 2 : i64, issue_token = true, metadata = @out_1} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 132382720][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 0 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 165937152][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 1 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64640][1, 126, 16, 64][0, 256, 128256, 1]) {id = 2 : i64, issue_token = true, metadata = @out_2} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 132513792][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 0 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 166068224][62, 16, 64, 128][524288, 128, 2048, 1]) {id = 1 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64704][1, 126, 16, 64][0, 256, 128256, 1]) {id = 2 : i64, issue_token = true, metadata = @out_3} : memref<2052096xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][64, 16, 16, 128][0, 128, 2048, 1]) {id = 8 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][59, 16, 16, 128][0, 128, 2048, 1]) {id = 9 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 198180864][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 10 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 231735296][59, 16, 64, 128][524288, 128, 2048, 1]) {id = 11 : i64, metadata = @b_0} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 96768][1, 123, 16, 64][0, 256, 128256, 1]) {id = 12 : i64, issue_token = true, metadata = @out_0} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 198311936][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 8 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 231866368][59, 16, 64, 128][524288, 128, 2048, 1]) {id = 9 : i64, metadata = @b_1} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 96832][1, 123, 16, 64][0, 256, 128256, 1]) {id = 10 : i64, issue_token = true, metadata = @out_1} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 198443008][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 8 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 231997440][59, 16, 64, 128][524288, 128, 2048, 1]) {id = 9 : i64, metadata = @b_2} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 96896][1, 123, 16, 64][0, 256, 128256, 1]) {id = 10 : i64, issue_token = true, metadata = @out_2} : memref<2052096xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 198574080][64, 16, 64, 128][524288, 128, 2048, 1]) {id = 8 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 232128512][59, 16, 64, 128][524288, 128, 2048, 1]) {id = 9 : i64, metadata = @b_3} : memref<262668288xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 96960][1, 123, 16, 64][0, 256, 128256, 1]) {id = 10 : i64, issue_token = true, metadata = @out_3} : memref<2052096xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
    }
  }
}
