// IRON design: CausalAttention(heads=32, kv_heads=8, head_dim=64, max_len=2048, rows=16, start=PerCall('position', scratchpad), kv_tile=64, num_aie_columns=4, q_tile=4) on npu1; mlir-aie v1.4.1
// streams all max_len=2048 cache positions per call; the kernel masks positions past each row's limit (start)
// K and V stream in spans of 1 chunk of 64 positions; one descriptor alternates k_cache and v_cache (1048576 elements apart); the shim sends each kv head 4 times (once a query tile)
module {
  aie.device(npu1) @main {
    func.func private @attention_bf16_init(memref<1024xf32>, memref<32xf32>, i32, i32) attributes {link_with = "attention_bf16.o"}
    func.func private @attention_bf16_chunk(memref<1025xi32>, memref<8192xbf16>, memref<1024xf32>, memref<1024xf32>, memref<32xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) attributes {link_with = "attention_bf16.o"}
    func.func private @attention_bf16_store(memref<1024xf32>, memref<32xf32>, memref<1024xbf16>, i32, i32) attributes {link_with = "attention_bf16.o"}
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
    aie.objectfifo @kv_in_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_0(%mem_tile_0_1, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_0] -> [@kv_0]([] [])
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo @kv_in_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_1(%mem_tile_1_1, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_1] -> [@kv_1]([] [])
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo @kv_in_2(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_2(%mem_tile_2_1, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_2] -> [@kv_2]([] [])
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo @kv_in_3(%shim_noc_tile_3_0, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_3(%mem_tile_3_1, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_3] -> [@kv_3]([] [])
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo @q_in_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<1024xi32>>
    aie.objectfifo @words_0(%shim_noc_tile_1_0, {%mem_tile_0_1}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @qw_0(%mem_tile_0_1, {%tile_0_2, %tile_1_2}, 2 : i32) : !aie.objectfifo<memref<1025xi32>>
    aie.objectfifo.link [@q_in_0, @words_0] -> [@qw_0]([0, 1024] [])
    aie.objectfifo @q_in_1(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<1024xi32>>
    aie.objectfifo @words_1(%shim_noc_tile_3_0, {%mem_tile_2_1}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @qw_1(%mem_tile_2_1, {%tile_2_2, %tile_3_2}, 2 : i32) : !aie.objectfifo<memref<1025xi32>>
    aie.objectfifo.link [@q_in_1, @words_1] -> [@qw_1]([0, 1024] [])
    %scores_0 = aie.buffer(%tile_0_2) {sym_name = "scores_0"} : memref<1024xf32>
    %acc_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0"} : memref<1024xf32>
    %stats_0 = aie.buffer(%tile_0_2) {sym_name = "stats_0"} : memref<32xf32>
    %scores_1 = aie.buffer(%tile_1_2) {sym_name = "scores_1"} : memref<1024xf32>
    %acc_1 = aie.buffer(%tile_1_2) {sym_name = "acc_1"} : memref<1024xf32>
    %stats_1 = aie.buffer(%tile_1_2) {sym_name = "stats_1"} : memref<32xf32>
    %scores_2 = aie.buffer(%tile_2_2) {sym_name = "scores_2"} : memref<1024xf32>
    %acc_2 = aie.buffer(%tile_2_2) {sym_name = "acc_2"} : memref<1024xf32>
    %stats_2 = aie.buffer(%tile_2_2) {sym_name = "stats_2"} : memref<32xf32>
    %scores_3 = aie.buffer(%tile_3_2) {sym_name = "scores_3"} : memref<1024xf32>
    %acc_3 = aie.buffer(%tile_3_2) {sym_name = "acc_3"} : memref<1024xf32>
    %stats_3 = aie.buffer(%tile_3_2) {sym_name = "stats_3"} : memref<32xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c32 = arith.constant 32 : index
      %c16_i32 = arith.constant 16 : i32
      %c64_i32 = arith.constant 64 : i32
      %c4_i32 = arith.constant 4 : i32
      %c0_i32 = arith.constant 0 : i32
      %c1_i32 = arith.constant 1 : i32
      %c1040187392_i32 = arith.constant 1040187392 : i32
      %c1024 = arith.constant 1024 : index
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %h = %c0 to %c2 step %c1 {
          scf.for %qt = %c0 to %c4 step %c1 {
            %q_view = aie.objectfifo.acquire @qw_0(Consume, 1) : !aie.objectfifosubview<memref<1025xi32>>
            %q = aie.objectfifo.subview.access %q_view[0] : !aie.objectfifosubview<memref<1025xi32>> -> memref<1025xi32>
            %start = memref.load %q[%c1024] : memref<1025xi32>
            %q_index = arith.index_cast %qt : index to i32
            func.call @attention_bf16_init(%acc_0, %stats_0, %c16_i32, %c64_i32) : (memref<1024xf32>, memref<32xf32>, i32, i32) -> ()
            scf.for %t = %c0 to %c32 step %c1 {
              %kv_view = aie.objectfifo.acquire @kv_0(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv = aie.objectfifo.subview.access %kv_view[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk = arith.index_cast %t : index to i32
              func.call @attention_bf16_chunk(%q, %kv, %scores_0, %acc_0, %stats_0, %c0_i32, %c16_i32, %c4_i32, %c64_i32, %c64_i32, %chunk, %start, %q_index, %c1_i32, %c1040187392_i32) : (memref<1025xi32>, memref<8192xbf16>, memref<1024xf32>, memref<1024xf32>, memref<32xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_0(Consume, 1)
            }
            %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<1024xbf16>>
            %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<1024xbf16>> -> memref<1024xbf16>
            func.call @attention_bf16_store(%acc_0, %stats_0, %out, %c16_i32, %c64_i32) : (memref<1024xf32>, memref<32xf32>, memref<1024xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_0(Produce, 1)
            aie.objectfifo.release @qw_0(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c2_1 = arith.constant 2 : index
      %c4_1 = arith.constant 4 : index
      %c32_1 = arith.constant 32 : index
      %c16_i32_1 = arith.constant 16 : i32
      %c64_i32_1 = arith.constant 64 : i32
      %c4_i32_1 = arith.constant 4 : i32
      %c1024_i32 = arith.constant 1024 : i32
      %c1_i32_1 = arith.constant 1 : i32
      %c1040187392_i32_1 = arith.constant 1040187392 : i32
      %c1024_1 = arith.constant 1024 : index
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %h_1 = %c0_1 to %c2_1 step %c1_1 {
          scf.for %qt_1 = %c0_1 to %c4_1 step %c1_1 {
            %q_view_1 = aie.objectfifo.acquire @qw_0(Consume, 1) : !aie.objectfifosubview<memref<1025xi32>>
            %q_1 = aie.objectfifo.subview.access %q_view_1[0] : !aie.objectfifosubview<memref<1025xi32>> -> memref<1025xi32>
            %start_1 = memref.load %q_1[%c1024_1] : memref<1025xi32>
            %q_index_1 = arith.index_cast %qt_1 : index to i32
            func.call @attention_bf16_init(%acc_1, %stats_1, %c16_i32_1, %c64_i32_1) : (memref<1024xf32>, memref<32xf32>, i32, i32) -> ()
            scf.for %t_1 = %c0_1 to %c32_1 step %c1_1 {
              %kv_view_1 = aie.objectfifo.acquire @kv_1(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_1 = aie.objectfifo.subview.access %kv_view_1[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_1 = arith.index_cast %t_1 : index to i32
              func.call @attention_bf16_chunk(%q_1, %kv_1, %scores_1, %acc_1, %stats_1, %c1024_i32, %c16_i32_1, %c4_i32_1, %c64_i32_1, %c64_i32_1, %chunk_1, %start_1, %q_index_1, %c1_i32_1, %c1040187392_i32_1) : (memref<1025xi32>, memref<8192xbf16>, memref<1024xf32>, memref<1024xf32>, memref<32xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_1(Consume, 1)
            }
            %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<1024xbf16>>
            %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<1024xbf16>> -> memref<1024xbf16>
            func.call @attention_bf16_store(%acc_1, %stats_1, %out_1, %c16_i32_1, %c64_i32_1) : (memref<1024xf32>, memref<32xf32>, memref<1024xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_1(Produce, 1)
            aie.objectfifo.release @qw_0(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c2_2 = arith.constant 2 : index
      %c4_2 = arith.constant 4 : index
      %c32_2 = arith.constant 32 : index
      %c16_i32_2 = arith.constant 16 : i32
      %c64_i32_2 = arith.constant 64 : i32
      %c4_i32_2 = arith.constant 4 : i32
      %c0_i32_1 = arith.constant 0 : i32
      %c1_i32_2 = arith.constant 1 : i32
      %c1040187392_i32_2 = arith.constant 1040187392 : i32
      %c1024_2 = arith.constant 1024 : index
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %h_2 = %c0_2 to %c2_2 step %c1_2 {
          scf.for %qt_2 = %c0_2 to %c4_2 step %c1_2 {
            %q_view_2 = aie.objectfifo.acquire @qw_1(Consume, 1) : !aie.objectfifosubview<memref<1025xi32>>
            %q_2 = aie.objectfifo.subview.access %q_view_2[0] : !aie.objectfifosubview<memref<1025xi32>> -> memref<1025xi32>
            %start_2 = memref.load %q_2[%c1024_2] : memref<1025xi32>
            %q_index_2 = arith.index_cast %qt_2 : index to i32
            func.call @attention_bf16_init(%acc_2, %stats_2, %c16_i32_2, %c64_i32_2) : (memref<1024xf32>, memref<32xf32>, i32, i32) -> ()
            scf.for %t_2 = %c0_2 to %c32_2 step %c1_2 {
              %kv_view_2 = aie.objectfifo.acquire @kv_2(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_2 = aie.objectfifo.subview.access %kv_view_2[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_2 = arith.index_cast %t_2 : index to i32
              func.call @attention_bf16_chunk(%q_2, %kv_2, %scores_2, %acc_2, %stats_2, %c0_i32_1, %c16_i32_2, %c4_i32_2, %c64_i32_2, %c64_i32_2, %chunk_2, %start_2, %q_index_2, %c1_i32_2, %c1040187392_i32_2) : (memref<1025xi32>, memref<8192xbf16>, memref<1024xf32>, memref<1024xf32>, memref<32xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_2(Consume, 1)
            }
            %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<1024xbf16>>
            %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<1024xbf16>> -> memref<1024xbf16>
            func.call @attention_bf16_store(%acc_2, %stats_2, %out_2, %c16_i32_2, %c64_i32_2) : (memref<1024xf32>, memref<32xf32>, memref<1024xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_2(Produce, 1)
            aie.objectfifo.release @qw_1(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c2_3 = arith.constant 2 : index
      %c4_3 = arith.constant 4 : index
      %c32_3 = arith.constant 32 : index
      %c16_i32_3 = arith.constant 16 : i32
      %c64_i32_3 = arith.constant 64 : i32
      %c4_i32_3 = arith.constant 4 : i32
      %c1024_i32_1 = arith.constant 1024 : i32
      %c1_i32_3 = arith.constant 1 : i32
      %c1040187392_i32_3 = arith.constant 1040187392 : i32
      %c1024_3 = arith.constant 1024 : index
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %h_3 = %c0_3 to %c2_3 step %c1_3 {
          scf.for %qt_3 = %c0_3 to %c4_3 step %c1_3 {
            %q_view_3 = aie.objectfifo.acquire @qw_1(Consume, 1) : !aie.objectfifosubview<memref<1025xi32>>
            %q_3 = aie.objectfifo.subview.access %q_view_3[0] : !aie.objectfifosubview<memref<1025xi32>> -> memref<1025xi32>
            %start_3 = memref.load %q_3[%c1024_3] : memref<1025xi32>
            %q_index_3 = arith.index_cast %qt_3 : index to i32
            func.call @attention_bf16_init(%acc_3, %stats_3, %c16_i32_3, %c64_i32_3) : (memref<1024xf32>, memref<32xf32>, i32, i32) -> ()
            scf.for %t_3 = %c0_3 to %c32_3 step %c1_3 {
              %kv_view_3 = aie.objectfifo.acquire @kv_3(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_3 = aie.objectfifo.subview.access %kv_view_3[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_3 = arith.index_cast %t_3 : index to i32
              func.call @attention_bf16_chunk(%q_3, %kv_3, %scores_3, %acc_3, %stats_3, %c1024_i32_1, %c16_i32_3, %c4_i32_3, %c64_i32_3, %c64_i32_3, %chunk_3, %start_3, %q_index_3, %c1_i32_3, %c1040187392_i32_3) : (memref<1025xi32>, memref<8192xbf16>, memref<1024xf32>, memref<1024xf32>, memref<32xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_3(Consume, 1)
            }
            %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<1024xbf16>>
            %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<1024xbf16>> -> memref<1024xbf16>
            func.call @attention_bf16_store(%acc_3, %stats_3, %out_3, %c16_i32_3, %c64_i32_3) : (memref<1024xf32>, memref<32xf32>, memref<1024xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_3(Produce, 1)
            aie.objectfifo.release @qw_1(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%arena: memref<2129920xbf16>, %q_buf: memref<32768xbf16>, %out_buf: memref<32768xbf16>, %words_buf: memref<1xi32>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][2, 4, 4, 256][256, 8192, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 0][4, 2, 4, 256][8192, 512, 2048, 1]) {id = 1 : i64, metadata = @q_in_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 256][4, 2, 4, 256][8192, 512, 2048, 1]) {id = 2 : i64, metadata = @q_in_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 512][2, 4, 4, 256][256, 8192, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][8, 1, 1, 1][0, 0, 0, 1]) {id = 1 : i64, metadata = @words_0} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1024][2, 4, 4, 256][256, 8192, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 1024][4, 2, 4, 256][8192, 512, 2048, 1]) {id = 1 : i64, metadata = @q_in_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 1280][4, 2, 4, 256][8192, 512, 2048, 1]) {id = 2 : i64, metadata = @q_in_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1536][2, 4, 4, 256][256, 8192, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][8, 1, 1, 1][0, 0, 0, 1]) {id = 1 : i64, metadata = @words_1} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 32768][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 32768][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, issue_token = true, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 294912][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 2 : i64, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 294912][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, issue_token = true, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 557056][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 557056][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, issue_token = true, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 819200][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 2 : i64, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 819200][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, issue_token = true, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 32768][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 5 : i64, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 32768][64, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 6 : i64, issue_token = true, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 294912][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 294912][64, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 5 : i64, issue_token = true, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 557056][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 5 : i64, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 557056][64, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 6 : i64, issue_token = true, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 819200][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 819200][64, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 5 : i64, issue_token = true, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_wait {symbol = @kv_in_0}
      aiex.npu.dma_wait {symbol = @kv_in_1}
      aiex.npu.dma_wait {symbol = @kv_in_2}
      aiex.npu.dma_wait {symbol = @kv_in_3}
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 163840][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 163840][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, issue_token = true, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 425984][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 2 : i64, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 425984][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, issue_token = true, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 688128][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 688128][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, issue_token = true, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 950272][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 2 : i64, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 950272][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 3 : i64, issue_token = true, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_wait {symbol = @kv_in_0}
      aiex.npu.dma_wait {symbol = @kv_in_1}
      aiex.npu.dma_wait {symbol = @kv_in_2}
      aiex.npu.dma_wait {symbol = @kv_in_3}
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 163840][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 5 : i64, issue_token = true, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 425984][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, issue_token = true, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 688128][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 5 : i64, issue_token = true, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 950272][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 4 : i64, issue_token = true, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_wait {symbol = @kv_in_0}
      aiex.npu.dma_wait {symbol = @kv_in_1}
      aiex.npu.dma_wait {symbol = @kv_in_2}
      aiex.npu.dma_wait {symbol = @kv_in_3}
      aiex.npu.dma_wait {symbol = @kv_in_0}
      aiex.npu.dma_wait {symbol = @kv_in_1}
      aiex.npu.dma_wait {symbol = @kv_in_2}
      aiex.npu.dma_wait {symbol = @kv_in_3}
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
    }
  }
}
