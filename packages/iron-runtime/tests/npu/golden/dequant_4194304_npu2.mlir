// IRON design: Dequant(N=4194304, packed_bytes=2097152, groups=131072, tile_size=4096, num_aie_columns=8) on npu2; mlir-aie v1.4.1
module {
  aie.device(npu2) @main {
    func.func private @dequant_bf16(memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) attributes {link_with = "dequant_bf16.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %shim_noc_tile_4_0 = aie.tile(4, 0)
    %shim_noc_tile_5_0 = aie.tile(5, 0)
    %shim_noc_tile_6_0 = aie.tile(6, 0)
    %shim_noc_tile_7_0 = aie.tile(7, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    %tile_4_2 = aie.tile(4, 2)
    %tile_5_2 = aie.tile(5, 2)
    %tile_6_2 = aie.tile(6, 2)
    %tile_7_2 = aie.tile(7, 2)
    aie.objectfifo @packed_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_4(%shim_noc_tile_4_0, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_4(%shim_noc_tile_4_0, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_4(%tile_4_2, {%shim_noc_tile_4_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_5(%shim_noc_tile_5_0, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_5(%shim_noc_tile_5_0, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_5(%tile_5_2, {%shim_noc_tile_5_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_6(%shim_noc_tile_6_0, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_6(%shim_noc_tile_6_0, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_6(%tile_6_2, {%shim_noc_tile_6_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @packed_7(%shim_noc_tile_7_0, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
    aie.objectfifo @scales_7(%shim_noc_tile_7_0, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_7(%tile_7_2, {%shim_noc_tile_7_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c128 = arith.constant 128 : index
      %c4096_i32 = arith.constant 4096 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c128 step %c1 {
          %packed_view = aie.objectfifo.acquire @packed_0(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed = aie.objectfifo.subview.access %packed_view[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view = aie.objectfifo.acquire @scales_0(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales = aie.objectfifo.subview.access %scales_view[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed, %scales, %out, %c4096_i32) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_0(Consume, 1)
          aie.objectfifo.release @scales_0(Consume, 1)
          aie.objectfifo.release @out_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c128_1 = arith.constant 128 : index
      %c4096_i32_1 = arith.constant 4096 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %t_1 = %c0_1 to %c128_1 step %c1_1 {
          %packed_view_1 = aie.objectfifo.acquire @packed_1(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_1 = aie.objectfifo.subview.access %packed_view_1[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_1 = aie.objectfifo.acquire @scales_1(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_1 = aie.objectfifo.subview.access %scales_view_1[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_1, %scales_1, %out_1, %c4096_i32_1) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_1(Consume, 1)
          aie.objectfifo.release @scales_1(Consume, 1)
          aie.objectfifo.release @out_1(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c128_2 = arith.constant 128 : index
      %c4096_i32_2 = arith.constant 4096 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %t_2 = %c0_2 to %c128_2 step %c1_2 {
          %packed_view_2 = aie.objectfifo.acquire @packed_2(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_2 = aie.objectfifo.subview.access %packed_view_2[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_2 = aie.objectfifo.acquire @scales_2(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_2 = aie.objectfifo.subview.access %scales_view_2[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_2, %scales_2, %out_2, %c4096_i32_2) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_2(Consume, 1)
          aie.objectfifo.release @scales_2(Consume, 1)
          aie.objectfifo.release @out_2(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c128_3 = arith.constant 128 : index
      %c4096_i32_3 = arith.constant 4096 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %t_3 = %c0_3 to %c128_3 step %c1_3 {
          %packed_view_3 = aie.objectfifo.acquire @packed_3(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_3 = aie.objectfifo.subview.access %packed_view_3[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_3 = aie.objectfifo.acquire @scales_3(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_3 = aie.objectfifo.subview.access %scales_view_3[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_3, %scales_3, %out_3, %c4096_i32_3) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_3(Consume, 1)
          aie.objectfifo.release @scales_3(Consume, 1)
          aie.objectfifo.release @out_3(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_4_2 = aie.core(%tile_4_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c128_4 = arith.constant 128 : index
      %c4096_i32_4 = arith.constant 4096 : i32
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        scf.for %t_4 = %c0_4 to %c128_4 step %c1_4 {
          %packed_view_4 = aie.objectfifo.acquire @packed_4(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_4 = aie.objectfifo.subview.access %packed_view_4[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_4 = aie.objectfifo.acquire @scales_4(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_4 = aie.objectfifo.subview.access %scales_view_4[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_4 = aie.objectfifo.acquire @out_4(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_4 = aie.objectfifo.subview.access %out_view_4[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_4, %scales_4, %out_4, %c4096_i32_4) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_4(Consume, 1)
          aie.objectfifo.release @scales_4(Consume, 1)
          aie.objectfifo.release @out_4(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_5_2 = aie.core(%tile_5_2) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c128_5 = arith.constant 128 : index
      %c4096_i32_5 = arith.constant 4096 : i32
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        scf.for %t_5 = %c0_5 to %c128_5 step %c1_5 {
          %packed_view_5 = aie.objectfifo.acquire @packed_5(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_5 = aie.objectfifo.subview.access %packed_view_5[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_5 = aie.objectfifo.acquire @scales_5(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_5 = aie.objectfifo.subview.access %scales_view_5[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_5 = aie.objectfifo.acquire @out_5(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_5 = aie.objectfifo.subview.access %out_view_5[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_5, %scales_5, %out_5, %c4096_i32_5) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_5(Consume, 1)
          aie.objectfifo.release @scales_5(Consume, 1)
          aie.objectfifo.release @out_5(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_6_2 = aie.core(%tile_6_2) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c128_6 = arith.constant 128 : index
      %c4096_i32_6 = arith.constant 4096 : i32
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        scf.for %t_6 = %c0_6 to %c128_6 step %c1_6 {
          %packed_view_6 = aie.objectfifo.acquire @packed_6(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_6 = aie.objectfifo.subview.access %packed_view_6[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_6 = aie.objectfifo.acquire @scales_6(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_6 = aie.objectfifo.subview.access %scales_view_6[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_6 = aie.objectfifo.acquire @out_6(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_6 = aie.objectfifo.subview.access %out_view_6[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_6, %scales_6, %out_6, %c4096_i32_6) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_6(Consume, 1)
          aie.objectfifo.release @scales_6(Consume, 1)
          aie.objectfifo.release @out_6(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_7_2 = aie.core(%tile_7_2) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c128_7 = arith.constant 128 : index
      %c4096_i32_7 = arith.constant 4096 : i32
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        scf.for %t_7 = %c0_7 to %c128_7 step %c1_7 {
          %packed_view_7 = aie.objectfifo.acquire @packed_7(Consume, 1) : !aie.objectfifosubview<memref<2048xi8>>
          %packed_7 = aie.objectfifo.subview.access %packed_view_7[0] : !aie.objectfifosubview<memref<2048xi8>> -> memref<2048xi8>
          %scales_view_7 = aie.objectfifo.acquire @scales_7(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
          %scales_7 = aie.objectfifo.subview.access %scales_view_7[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
          %out_view_7 = aie.objectfifo.acquire @out_7(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_7 = aie.objectfifo.subview.access %out_view_7[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @dequant_bf16(%packed_7, %scales_7, %out_7, %c4096_i32_7) : (memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) -> ()
          aie.objectfifo.release @packed_7(Consume, 1)
          aie.objectfifo.release @scales_7(Consume, 1)
          aie.objectfifo.release @out_7(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%packed_buf: memref<2097152xi8>, %scales_buf: memref<131072xbf16>, %out_buf: memref<4194304xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 0][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_0} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 0][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 524288][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 262144][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_1} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 16384][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1048576][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 524288][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_2} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 32768][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_2} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1572864][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 786432][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_3} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 49152][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_3} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 2097152][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_4} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 1048576][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_4} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 65536][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_4} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 2621440][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_5} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 1310720][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_5} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 81920][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_5} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 3145728][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_6} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 1572864][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_6} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 98304][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_6} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 3670016][1, 1, 512, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_7} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 1835008][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_7} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 114688][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_7} : memref<131072xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
      aiex.npu.dma_wait {symbol = @out_4}
      aiex.npu.dma_wait {symbol = @out_5}
      aiex.npu.dma_wait {symbol = @out_6}
      aiex.npu.dma_wait {symbol = @out_7}
    }
  }
}
