// IRON design: Sample(vocab=128256, temperature=0.0, top_k=1, top_p=1.0, seed=0, itemsize=2, tile_size=4008) on npu2; mlir-aie v1.4.1
module {
  aie.device(npu2) @main {
    func.func private @sample_reset(memref<4xi32>, i32) attributes {link_with = "sample.o"}
    func.func private @sample_scan_bf16(memref<4008xbf16>, memref<4xi32>, i32, i32) attributes {link_with = "sample.o"}
    func.func private @sample_pick(memref<4xi32>, memref<1xi32>, i32, i32, i32, i32) attributes {link_with = "sample.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %tile_0_2 = aie.tile(0, 2)
    aie.objectfifo @logits_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<4008xbf16>>
    aie.objectfifo @token_0(%tile_0_2, {%shim_noc_tile_0_0}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    %topk_0 = aie.buffer(%tile_0_2) {sym_name = "topk_0"} : memref<4xi32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c32 = arith.constant 32 : index
      %c4008_i32 = arith.constant 4008 : i32
      %c1_i32 = arith.constant 1 : i32
      %c0_i32 = arith.constant 0 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        func.call @sample_reset(%topk_0, %c1_i32) : (memref<4xi32>, i32) -> ()
        scf.for %t = %c0 to %c32 step %c1 {
          %chunk_view = aie.objectfifo.acquire @logits_0(Consume, 1) : !aie.objectfifosubview<memref<4008xbf16>>
          %chunk = aie.objectfifo.subview.access %chunk_view[0] : !aie.objectfifosubview<memref<4008xbf16>> -> memref<4008xbf16>
          func.call @sample_scan_bf16(%chunk, %topk_0, %c4008_i32, %c1_i32) : (memref<4008xbf16>, memref<4xi32>, i32, i32) -> ()
          aie.objectfifo.release @logits_0(Consume, 1)
        }
        %token_view = aie.objectfifo.acquire @token_0(Produce, 1) : !aie.objectfifosubview<memref<1xi32>>
        %token = aie.objectfifo.subview.access %token_view[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        func.call @sample_pick(%topk_0, %token, %c1_i32, %c1_i32, %c0_i32, %c0_i32) : (memref<4xi32>, memref<1xi32>, i32, i32, i32, i32) -> ()
        aie.objectfifo.release @token_0(Produce, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%logits_buf: memref<128256xbf16>, %token_buf: memref<1xi32>) {
      aiex.npu.dma_memcpy_nd(%token_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @token_0} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%logits_buf[0, 0, 0, 0][1, 1, 64, 2004][0, 0, 2004, 1]) {id = 1 : i64, metadata = @logits_0} : memref<128256xbf16>
      aiex.npu.dma_wait {symbol = @token_0}
    }
  }
}
