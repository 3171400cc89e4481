// IRON design: DecodeAttention(heads=32, kv_heads=8, head_dim=64, max_len=2048, length=Affine(position + 1), kv_tile=64, num_aie_columns=8) on npu2; mlir-aie v1.4.1
// streams all max_len=2048 cache positions per call; the kernel masks positions past each row's limit (length)
// K and V stream in spans of 1 chunk of 64 positions; one descriptor alternates k_cache and v_cache (1048576 elements apart); the shim sends each kv head once
module {
  aie.device(npu2) @main {
    func.func private @attention_bf16_init(memref<256xf32>, memref<8xf32>, i32, i32) attributes {link_with = "attention_bf16.o"}
    func.func private @attention_bf16_chunk(memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) attributes {link_with = "attention_bf16.o"}
    func.func private @attention_bf16_store(memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) attributes {link_with = "attention_bf16.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %shim_noc_tile_4_0 = aie.tile(4, 0)
    %shim_noc_tile_5_0 = aie.tile(5, 0)
    %shim_noc_tile_6_0 = aie.tile(6, 0)
    %shim_noc_tile_7_0 = aie.tile(7, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    %mem_tile_1_1 = aie.tile(1, 1)
    %mem_tile_2_1 = aie.tile(2, 1)
    %mem_tile_3_1 = aie.tile(3, 1)
    %mem_tile_4_1 = aie.tile(4, 1)
    %mem_tile_5_1 = aie.tile(5, 1)
    %mem_tile_6_1 = aie.tile(6, 1)
    %mem_tile_7_1 = aie.tile(7, 1)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    %tile_4_2 = aie.tile(4, 2)
    %tile_5_2 = aie.tile(5, 2)
    %tile_6_2 = aie.tile(6, 2)
    %tile_7_2 = aie.tile(7, 2)
    aie.objectfifo @kv_in_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_0(%mem_tile_0_1, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_0] -> [@kv_0]([] [])
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_1(%mem_tile_1_1, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_1] -> [@kv_1]([] [])
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_2(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_2(%mem_tile_2_1, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_2] -> [@kv_2]([] [])
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_3(%shim_noc_tile_3_0, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_3(%mem_tile_3_1, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_3] -> [@kv_3]([] [])
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_4(%shim_noc_tile_4_0, {%mem_tile_4_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_4(%mem_tile_4_1, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_4] -> [@kv_4]([] [])
    aie.objectfifo @out_4(%tile_4_2, {%shim_noc_tile_4_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_5(%shim_noc_tile_5_0, {%mem_tile_5_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_5(%mem_tile_5_1, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_5] -> [@kv_5]([] [])
    aie.objectfifo @out_5(%tile_5_2, {%shim_noc_tile_5_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_6(%shim_noc_tile_6_0, {%mem_tile_6_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_6(%mem_tile_6_1, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_6] -> [@kv_6]([] [])
    aie.objectfifo @out_6(%tile_6_2, {%shim_noc_tile_6_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @kv_in_7(%shim_noc_tile_7_0, {%mem_tile_7_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @kv_7(%mem_tile_7_1, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_7] -> [@kv_7]([] [])
    aie.objectfifo @out_7(%tile_7_2, {%shim_noc_tile_7_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @q_in_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<256xi32>>
    aie.objectfifo @words_0(%shim_noc_tile_1_0, {%mem_tile_0_1}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @qw_0(%mem_tile_0_1, {%tile_0_2, %tile_1_2}, 2 : i32) : !aie.objectfifo<memref<257xi32>>
    aie.objectfifo.link [@q_in_0, @words_0] -> [@qw_0]([0, 256] [])
    aie.objectfifo @q_in_1(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<256xi32>>
    aie.objectfifo @words_1(%shim_noc_tile_3_0, {%mem_tile_2_1}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @qw_1(%mem_tile_2_1, {%tile_2_2, %tile_3_2}, 2 : i32) : !aie.objectfifo<memref<257xi32>>
    aie.objectfifo.link [@q_in_1, @words_1] -> [@qw_1]([0, 256] [])
    aie.objectfifo @q_in_2(%shim_noc_tile_4_0, {%mem_tile_4_1}, 2 : i32) : !aie.objectfifo<memref<256xi32>>
    aie.objectfifo @words_2(%shim_noc_tile_5_0, {%mem_tile_4_1}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @qw_2(%mem_tile_4_1, {%tile_4_2, %tile_5_2}, 2 : i32) : !aie.objectfifo<memref<257xi32>>
    aie.objectfifo.link [@q_in_2, @words_2] -> [@qw_2]([0, 256] [])
    aie.objectfifo @q_in_3(%shim_noc_tile_6_0, {%mem_tile_6_1}, 2 : i32) : !aie.objectfifo<memref<256xi32>>
    aie.objectfifo @words_3(%shim_noc_tile_7_0, {%mem_tile_6_1}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @qw_3(%mem_tile_6_1, {%tile_6_2, %tile_7_2}, 2 : i32) : !aie.objectfifo<memref<257xi32>>
    aie.objectfifo.link [@q_in_3, @words_3] -> [@qw_3]([0, 256] [])
    %scores_0 = aie.buffer(%tile_0_2) {sym_name = "scores_0"} : memref<256xf32>
    %acc_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0"} : memref<256xf32>
    %stats_0 = aie.buffer(%tile_0_2) {sym_name = "stats_0"} : memref<8xf32>
    %scores_1 = aie.buffer(%tile_1_2) {sym_name = "scores_1"} : memref<256xf32>
    %acc_1 = aie.buffer(%tile_1_2) {sym_name = "acc_1"} : memref<256xf32>
    %stats_1 = aie.buffer(%tile_1_2) {sym_name = "stats_1"} : memref<8xf32>
    %scores_2 = aie.buffer(%tile_2_2) {sym_name = "scores_2"} : memref<256xf32>
    %acc_2 = aie.buffer(%tile_2_2) {sym_name = "acc_2"} : memref<256xf32>
    %stats_2 = aie.buffer(%tile_2_2) {sym_name = "stats_2"} : memref<8xf32>
    %scores_3 = aie.buffer(%tile_3_2) {sym_name = "scores_3"} : memref<256xf32>
    %acc_3 = aie.buffer(%tile_3_2) {sym_name = "acc_3"} : memref<256xf32>
    %stats_3 = aie.buffer(%tile_3_2) {sym_name = "stats_3"} : memref<8xf32>
    %scores_4 = aie.buffer(%tile_4_2) {sym_name = "scores_4"} : memref<256xf32>
    %acc_4 = aie.buffer(%tile_4_2) {sym_name = "acc_4"} : memref<256xf32>
    %stats_4 = aie.buffer(%tile_4_2) {sym_name = "stats_4"} : memref<8xf32>
    %scores_5 = aie.buffer(%tile_5_2) {sym_name = "scores_5"} : memref<256xf32>
    %acc_5 = aie.buffer(%tile_5_2) {sym_name = "acc_5"} : memref<256xf32>
    %stats_5 = aie.buffer(%tile_5_2) {sym_name = "stats_5"} : memref<8xf32>
    %scores_6 = aie.buffer(%tile_6_2) {sym_name = "scores_6"} : memref<256xf32>
    %acc_6 = aie.buffer(%tile_6_2) {sym_name = "acc_6"} : memref<256xf32>
    %stats_6 = aie.buffer(%tile_6_2) {sym_name = "stats_6"} : memref<8xf32>
    %scores_7 = aie.buffer(%tile_7_2) {sym_name = "scores_7"} : memref<256xf32>
    %acc_7 = aie.buffer(%tile_7_2) {sym_name = "acc_7"} : memref<256xf32>
    %stats_7 = aie.buffer(%tile_7_2) {sym_name = "stats_7"} : memref<8xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c32 = arith.constant 32 : index
      %c4_i32 = arith.constant 4 : i32
      %c64_i32 = arith.constant 64 : i32
      %c0_i32 = arith.constant 0 : i32
      %c1040187392_i32 = arith.constant 1040187392 : i32
      %c256 = arith.constant 256 : index
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %h = %c0 to %c1 step %c1 {
          scf.for %qt = %c0 to %c1 step %c1 {
            %q_view = aie.objectfifo.acquire @qw_0(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q = aie.objectfifo.subview.access %q_view[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length = memref.load %q[%c256] : memref<257xi32>
            %q_index = arith.index_cast %qt : index to i32
            func.call @attention_bf16_init(%acc_0, %stats_0, %c4_i32, %c64_i32) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t = %c0 to %c32 step %c1 {
              %kv_view = aie.objectfifo.acquire @kv_0(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv = aie.objectfifo.subview.access %kv_view[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk = arith.index_cast %t : index to i32
              func.call @attention_bf16_chunk(%q, %kv, %scores_0, %acc_0, %stats_0, %c0_i32, %c4_i32, %c4_i32, %c64_i32, %c64_i32, %chunk, %length, %q_index, %c0_i32, %c1040187392_i32) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_0(Consume, 1)
            }
            %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_0, %stats_0, %out, %c4_i32, %c64_i32) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
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
      %c32_1 = arith.constant 32 : index
      %c4_i32_1 = arith.constant 4 : i32
      %c64_i32_1 = arith.constant 64 : i32
      %c256_i32 = arith.constant 256 : i32
      %c0_i32_1 = arith.constant 0 : i32
      %c1040187392_i32_1 = arith.constant 1040187392 : i32
      %c256_1 = arith.constant 256 : index
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %h_1 = %c0_1 to %c1_1 step %c1_1 {
          scf.for %qt_1 = %c0_1 to %c1_1 step %c1_1 {
            %q_view_1 = aie.objectfifo.acquire @qw_0(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_1 = aie.objectfifo.subview.access %q_view_1[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_1 = memref.load %q_1[%c256_1] : memref<257xi32>
            %q_index_1 = arith.index_cast %qt_1 : index to i32
            func.call @attention_bf16_init(%acc_1, %stats_1, %c4_i32_1, %c64_i32_1) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_1 = %c0_1 to %c32_1 step %c1_1 {
              %kv_view_1 = aie.objectfifo.acquire @kv_1(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_1 = aie.objectfifo.subview.access %kv_view_1[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_1 = arith.index_cast %t_1 : index to i32
              func.call @attention_bf16_chunk(%q_1, %kv_1, %scores_1, %acc_1, %stats_1, %c256_i32, %c4_i32_1, %c4_i32_1, %c64_i32_1, %c64_i32_1, %chunk_1, %length_1, %q_index_1, %c0_i32_1, %c1040187392_i32_1) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_1(Consume, 1)
            }
            %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_1, %stats_1, %out_1, %c4_i32_1, %c64_i32_1) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
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
      %c32_2 = arith.constant 32 : index
      %c4_i32_2 = arith.constant 4 : i32
      %c64_i32_2 = arith.constant 64 : i32
      %c0_i32_2 = arith.constant 0 : i32
      %c1040187392_i32_2 = arith.constant 1040187392 : i32
      %c256_2 = arith.constant 256 : index
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %h_2 = %c0_2 to %c1_2 step %c1_2 {
          scf.for %qt_2 = %c0_2 to %c1_2 step %c1_2 {
            %q_view_2 = aie.objectfifo.acquire @qw_1(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_2 = aie.objectfifo.subview.access %q_view_2[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_2 = memref.load %q_2[%c256_2] : memref<257xi32>
            %q_index_2 = arith.index_cast %qt_2 : index to i32
            func.call @attention_bf16_init(%acc_2, %stats_2, %c4_i32_2, %c64_i32_2) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_2 = %c0_2 to %c32_2 step %c1_2 {
              %kv_view_2 = aie.objectfifo.acquire @kv_2(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_2 = aie.objectfifo.subview.access %kv_view_2[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_2 = arith.index_cast %t_2 : index to i32
              func.call @attention_bf16_chunk(%q_2, %kv_2, %scores_2, %acc_2, %stats_2, %c0_i32_2, %c4_i32_2, %c4_i32_2, %c64_i32_2, %c64_i32_2, %chunk_2, %length_2, %q_index_2, %c0_i32_2, %c1040187392_i32_2) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_2(Consume, 1)
            }
            %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_2, %stats_2, %out_2, %c4_i32_2, %c64_i32_2) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
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
      %c32_3 = arith.constant 32 : index
      %c4_i32_3 = arith.constant 4 : i32
      %c64_i32_3 = arith.constant 64 : i32
      %c256_i32_1 = arith.constant 256 : i32
      %c0_i32_3 = arith.constant 0 : i32
      %c1040187392_i32_3 = arith.constant 1040187392 : i32
      %c256_3 = arith.constant 256 : index
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %h_3 = %c0_3 to %c1_3 step %c1_3 {
          scf.for %qt_3 = %c0_3 to %c1_3 step %c1_3 {
            %q_view_3 = aie.objectfifo.acquire @qw_1(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_3 = aie.objectfifo.subview.access %q_view_3[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_3 = memref.load %q_3[%c256_3] : memref<257xi32>
            %q_index_3 = arith.index_cast %qt_3 : index to i32
            func.call @attention_bf16_init(%acc_3, %stats_3, %c4_i32_3, %c64_i32_3) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_3 = %c0_3 to %c32_3 step %c1_3 {
              %kv_view_3 = aie.objectfifo.acquire @kv_3(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_3 = aie.objectfifo.subview.access %kv_view_3[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_3 = arith.index_cast %t_3 : index to i32
              func.call @attention_bf16_chunk(%q_3, %kv_3, %scores_3, %acc_3, %stats_3, %c256_i32_1, %c4_i32_3, %c4_i32_3, %c64_i32_3, %c64_i32_3, %chunk_3, %length_3, %q_index_3, %c0_i32_3, %c1040187392_i32_3) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_3(Consume, 1)
            }
            %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_3, %stats_3, %out_3, %c4_i32_3, %c64_i32_3) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_3(Produce, 1)
            aie.objectfifo.release @qw_1(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_4_2 = aie.core(%tile_4_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c32_4 = arith.constant 32 : index
      %c4_i32_4 = arith.constant 4 : i32
      %c64_i32_4 = arith.constant 64 : i32
      %c0_i32_4 = arith.constant 0 : i32
      %c1040187392_i32_4 = arith.constant 1040187392 : i32
      %c256_4 = arith.constant 256 : index
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        scf.for %h_4 = %c0_4 to %c1_4 step %c1_4 {
          scf.for %qt_4 = %c0_4 to %c1_4 step %c1_4 {
            %q_view_4 = aie.objectfifo.acquire @qw_2(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_4 = aie.objectfifo.subview.access %q_view_4[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_4 = memref.load %q_4[%c256_4] : memref<257xi32>
            %q_index_4 = arith.index_cast %qt_4 : index to i32
            func.call @attention_bf16_init(%acc_4, %stats_4, %c4_i32_4, %c64_i32_4) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_4 = %c0_4 to %c32_4 step %c1_4 {
              %kv_view_4 = aie.objectfifo.acquire @kv_4(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_4 = aie.objectfifo.subview.access %kv_view_4[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_4 = arith.index_cast %t_4 : index to i32
              func.call @attention_bf16_chunk(%q_4, %kv_4, %scores_4, %acc_4, %stats_4, %c0_i32_4, %c4_i32_4, %c4_i32_4, %c64_i32_4, %c64_i32_4, %chunk_4, %length_4, %q_index_4, %c0_i32_4, %c1040187392_i32_4) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_4(Consume, 1)
            }
            %out_view_4 = aie.objectfifo.acquire @out_4(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_4 = aie.objectfifo.subview.access %out_view_4[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_4, %stats_4, %out_4, %c4_i32_4, %c64_i32_4) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_4(Produce, 1)
            aie.objectfifo.release @qw_2(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_5_2 = aie.core(%tile_5_2) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c32_5 = arith.constant 32 : index
      %c4_i32_5 = arith.constant 4 : i32
      %c64_i32_5 = arith.constant 64 : i32
      %c256_i32_2 = arith.constant 256 : i32
      %c0_i32_5 = arith.constant 0 : i32
      %c1040187392_i32_5 = arith.constant 1040187392 : i32
      %c256_5 = arith.constant 256 : index
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        scf.for %h_5 = %c0_5 to %c1_5 step %c1_5 {
          scf.for %qt_5 = %c0_5 to %c1_5 step %c1_5 {
            %q_view_5 = aie.objectfifo.acquire @qw_2(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_5 = aie.objectfifo.subview.access %q_view_5[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_5 = memref.load %q_5[%c256_5] : memref<257xi32>
            %q_index_5 = arith.index_cast %qt_5 : index to i32
            func.call @attention_bf16_init(%acc_5, %stats_5, %c4_i32_5, %c64_i32_5) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_5 = %c0_5 to %c32_5 step %c1_5 {
              %kv_view_5 = aie.objectfifo.acquire @kv_5(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_5 = aie.objectfifo.subview.access %kv_view_5[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_5 = arith.index_cast %t_5 : index to i32
              func.call @attention_bf16_chunk(%q_5, %kv_5, %scores_5, %acc_5, %stats_5, %c256_i32_2, %c4_i32_5, %c4_i32_5, %c64_i32_5, %c64_i32_5, %chunk_5, %length_5, %q_index_5, %c0_i32_5, %c1040187392_i32_5) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_5(Consume, 1)
            }
            %out_view_5 = aie.objectfifo.acquire @out_5(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_5 = aie.objectfifo.subview.access %out_view_5[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_5, %stats_5, %out_5, %c4_i32_5, %c64_i32_5) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_5(Produce, 1)
            aie.objectfifo.release @qw_2(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_6_2 = aie.core(%tile_6_2) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c32_6 = arith.constant 32 : index
      %c4_i32_6 = arith.constant 4 : i32
      %c64_i32_6 = arith.constant 64 : i32
      %c0_i32_6 = arith.constant 0 : i32
      %c1040187392_i32_6 = arith.constant 1040187392 : i32
      %c256_6 = arith.constant 256 : index
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        scf.for %h_6 = %c0_6 to %c1_6 step %c1_6 {
          scf.for %qt_6 = %c0_6 to %c1_6 step %c1_6 {
            %q_view_6 = aie.objectfifo.acquire @qw_3(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_6 = aie.objectfifo.subview.access %q_view_6[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_6 = memref.load %q_6[%c256_6] : memref<257xi32>
            %q_index_6 = arith.index_cast %qt_6 : index to i32
            func.call @attention_bf16_init(%acc_6, %stats_6, %c4_i32_6, %c64_i32_6) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_6 = %c0_6 to %c32_6 step %c1_6 {
              %kv_view_6 = aie.objectfifo.acquire @kv_6(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_6 = aie.objectfifo.subview.access %kv_view_6[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_6 = arith.index_cast %t_6 : index to i32
              func.call @attention_bf16_chunk(%q_6, %kv_6, %scores_6, %acc_6, %stats_6, %c0_i32_6, %c4_i32_6, %c4_i32_6, %c64_i32_6, %c64_i32_6, %chunk_6, %length_6, %q_index_6, %c0_i32_6, %c1040187392_i32_6) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_6(Consume, 1)
            }
            %out_view_6 = aie.objectfifo.acquire @out_6(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_6 = aie.objectfifo.subview.access %out_view_6[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_6, %stats_6, %out_6, %c4_i32_6, %c64_i32_6) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_6(Produce, 1)
            aie.objectfifo.release @qw_3(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_7_2 = aie.core(%tile_7_2) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c32_7 = arith.constant 32 : index
      %c4_i32_7 = arith.constant 4 : i32
      %c64_i32_7 = arith.constant 64 : i32
      %c256_i32_3 = arith.constant 256 : i32
      %c0_i32_7 = arith.constant 0 : i32
      %c1040187392_i32_7 = arith.constant 1040187392 : i32
      %c256_7 = arith.constant 256 : index
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        scf.for %h_7 = %c0_7 to %c1_7 step %c1_7 {
          scf.for %qt_7 = %c0_7 to %c1_7 step %c1_7 {
            %q_view_7 = aie.objectfifo.acquire @qw_3(Consume, 1) : !aie.objectfifosubview<memref<257xi32>>
            %q_7 = aie.objectfifo.subview.access %q_view_7[0] : !aie.objectfifosubview<memref<257xi32>> -> memref<257xi32>
            %length_7 = memref.load %q_7[%c256_7] : memref<257xi32>
            %q_index_7 = arith.index_cast %qt_7 : index to i32
            func.call @attention_bf16_init(%acc_7, %stats_7, %c4_i32_7, %c64_i32_7) : (memref<256xf32>, memref<8xf32>, i32, i32) -> ()
            scf.for %t_7 = %c0_7 to %c32_7 step %c1_7 {
              %kv_view_7 = aie.objectfifo.acquire @kv_7(Consume, 1) : !aie.objectfifosubview<memref<8192xbf16>>
              %kv_7 = aie.objectfifo.subview.access %kv_view_7[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
              %chunk_7 = arith.index_cast %t_7 : index to i32
              func.call @attention_bf16_chunk(%q_7, %kv_7, %scores_7, %acc_7, %stats_7, %c256_i32_3, %c4_i32_7, %c4_i32_7, %c64_i32_7, %c64_i32_7, %chunk_7, %length_7, %q_index_7, %c0_i32_7, %c1040187392_i32_7) : (memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> ()
              aie.objectfifo.release @kv_7(Consume, 1)
            }
            %out_view_7 = aie.objectfifo.acquire @out_7(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
            %out_7 = aie.objectfifo.subview.access %out_view_7[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
            func.call @attention_bf16_store(%acc_7, %stats_7, %out_7, %c4_i32_7, %c64_i32_7) : (memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32) -> ()
            aie.objectfifo.release @out_7(Produce, 1)
            aie.objectfifo.release @qw_3(Consume, 1)
          }
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%arena: memref<2129920xbf16>, %q_buf: memref<2048xbf16>, %out_buf: memref<2048xbf16>, %words_buf: memref<1xi32>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 32768][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_0} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 0][1, 2, 1, 256][0, 256, 0, 1]) {id = 2 : i64, metadata = @q_in_0} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 256][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 163840][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_1} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_0} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 512][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 294912][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_2} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 512][1, 2, 1, 256][0, 256, 0, 1]) {id = 2 : i64, metadata = @q_in_1} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 768][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 425984][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_3} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_1} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1024][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_4} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 557056][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_4} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 1024][1, 2, 1, 256][0, 256, 0, 1]) {id = 2 : i64, metadata = @q_in_2} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1280][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_5} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 688128][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_5} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_2} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1536][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_6} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 819200][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_6} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%q_buf[0, 0, 0, 1536][1, 2, 1, 256][0, 256, 0, 1]) {id = 2 : i64, metadata = @q_in_3} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1792][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_7} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 950272][32, 2, 4, 1024][4096, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_7} : memref<2129920xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_3} : memref<1xi32>
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
