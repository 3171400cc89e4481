// IRON design: Dequant(N=4194304, packed_bytes=2097152, groups=131072, tile_size=4096, num_aie_columns=4) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @dequant_bf16(memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) attributes {link_with = "dequant_bf16.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
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
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c256 = arith.constant 256 : index
      %c4096_i32 = arith.constant 4096 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c256 step %c1 {
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
      %c256_1 = arith.constant 256 : index
      %c4096_i32_1 = arith.constant 4096 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %t_1 = %c0_1 to %c256_1 step %c1_1 {
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
      %c256_2 = arith.constant 256 : index
      %c4096_i32_2 = arith.constant 4096 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %t_2 = %c0_2 to %c256_2 step %c1_2 {
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
      %c256_3 = arith.constant 256 : index
      %c4096_i32_3 = arith.constant 4096 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %t_3 = %c0_3 to %c256_3 step %c1_3 {
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
    aie.runtime_sequence @sequence(%packed_buf: memref<2097152xi8>, %scales_buf: memref<131072xbf16>, %out_buf: memref<4194304xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 2, 512, 1024][0, 524288, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 0][1, 1, 256, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_0} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 0][1, 1, 32, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1048576][1, 2, 512, 1024][0, 524288, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 524288][1, 1, 256, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_1} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 32768][1, 1, 32, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 2097152][1, 2, 512, 1024][0, 524288, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 1048576][1, 1, 256, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_2} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 65536][1, 1, 32, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_2} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 3145728][1, 2, 512, 1024][0, 524288, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<4194304xbf16>
      aiex.npu.dma_memcpy_nd(%packed_buf[0, 0, 0, 1572864][1, 1, 256, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_3} : memref<2097152xi8>
      aiex.npu.dma_memcpy_nd(%scales_buf[0, 0, 0, 98304][1, 1, 32, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_3} : memref<131072xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
    }
  }
}
