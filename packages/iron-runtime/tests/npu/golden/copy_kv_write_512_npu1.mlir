// IRON design: Copy(shape=(8, 64), itemsize=2, access=None) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    aie.objectfifo @view_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo.link [@view_0] -> [@out_0]([] [])
    aie.runtime_sequence @sequence(%view_buf: memref<512xbf16>, %out_buf: memref<917568xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 8, 64][0, 0, 131072, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<917568xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 1 : i64, metadata = @view_0} : memref<512xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
    }
  }
}
