// IRON design: Softmax(rows=32, cols=1024, length=Affine(position + 1), rows_per_tile=4, num_aie_columns=8) on npu2; mlir-aie v1.4.1
module {
  aie.device(npu2) @main {
    func.func private @softmax_bf16(memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) attributes {link_with = "softmax_bf16.o"}
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
    aie.objectfifo @words_0(%shim_noc_tile_0_0, {%tile_0_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_1(%shim_noc_tile_1_0, {%tile_1_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_2(%shim_noc_tile_2_0, {%tile_2_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_3(%shim_noc_tile_3_0, {%tile_3_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_4(%shim_noc_tile_4_0, {%tile_4_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_4(%shim_noc_tile_4_0, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_4(%tile_4_2, {%shim_noc_tile_4_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_5(%shim_noc_tile_5_0, {%tile_5_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_5(%shim_noc_tile_5_0, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_5(%tile_5_2, {%shim_noc_tile_5_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_6(%shim_noc_tile_6_0, {%tile_6_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_6(%shim_noc_tile_6_0, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_6(%tile_6_2, {%shim_noc_tile_6_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @words_7(%shim_noc_tile_7_0, {%tile_7_2}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @x_7(%shim_noc_tile_7_0, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    aie.objectfifo @out_7(%tile_7_2, {%shim_noc_tile_7_0}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
    %scratch_0 = aie.buffer(%tile_0_2) {sym_name = "scratch_0"} : memref<1024xf32>
    %scratch_1 = aie.buffer(%tile_1_2) {sym_name = "scratch_1"} : memref<1024xf32>
    %scratch_2 = aie.buffer(%tile_2_2) {sym_name = "scratch_2"} : memref<1024xf32>
    %scratch_3 = aie.buffer(%tile_3_2) {sym_name = "scratch_3"} : memref<1024xf32>
    %scratch_4 = aie.buffer(%tile_4_2) {sym_name = "scratch_4"} : memref<1024xf32>
    %scratch_5 = aie.buffer(%tile_5_2) {sym_name = "scratch_5"} : memref<1024xf32>
    %scratch_6 = aie.buffer(%tile_6_2) {sym_name = "scratch_6"} : memref<1024xf32>
    %scratch_7 = aie.buffer(%tile_7_2) {sym_name = "scratch_7"} : memref<1024xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4096_i32 = arith.constant 4096 : i32
      %c1024_i32 = arith.constant 1024 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        %words_view = aie.objectfifo.acquire @words_0(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words = aie.objectfifo.subview.access %words_view[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length = memref.load %words[%c0] : memref<1xi32>
        scf.for %t = %c0 to %c1 step %c1 {
          %x_view = aie.objectfifo.acquire @x_0(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x = aie.objectfifo.subview.access %x_view[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x, %out, %scratch_0, %c4096_i32, %c1024_i32, %length) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_0(Consume, 1)
          aie.objectfifo.release @out_0(Produce, 1)
        }
        aie.objectfifo.release @words_0(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c4096_i32_1 = arith.constant 4096 : i32
      %c1024_i32_1 = arith.constant 1024 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        %words_view_1 = aie.objectfifo.acquire @words_1(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_1 = aie.objectfifo.subview.access %words_view_1[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_1 = memref.load %words_1[%c0_1] : memref<1xi32>
        scf.for %t_1 = %c0_1 to %c1_1 step %c1_1 {
          %x_view_1 = aie.objectfifo.acquire @x_1(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_1 = aie.objectfifo.subview.access %x_view_1[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_1, %out_1, %scratch_1, %c4096_i32_1, %c1024_i32_1, %length_1) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_1(Consume, 1)
          aie.objectfifo.release @out_1(Produce, 1)
        }
        aie.objectfifo.release @words_1(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c4096_i32_2 = arith.constant 4096 : i32
      %c1024_i32_2 = arith.constant 1024 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        %words_view_2 = aie.objectfifo.acquire @words_2(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_2 = aie.objectfifo.subview.access %words_view_2[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_2 = memref.load %words_2[%c0_2] : memref<1xi32>
        scf.for %t_2 = %c0_2 to %c1_2 step %c1_2 {
          %x_view_2 = aie.objectfifo.acquire @x_2(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_2 = aie.objectfifo.subview.access %x_view_2[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_2, %out_2, %scratch_2, %c4096_i32_2, %c1024_i32_2, %length_2) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_2(Consume, 1)
          aie.objectfifo.release @out_2(Produce, 1)
        }
        aie.objectfifo.release @words_2(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c4096_i32_3 = arith.constant 4096 : i32
      %c1024_i32_3 = arith.constant 1024 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        %words_view_3 = aie.objectfifo.acquire @words_3(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_3 = aie.objectfifo.subview.access %words_view_3[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_3 = memref.load %words_3[%c0_3] : memref<1xi32>
        scf.for %t_3 = %c0_3 to %c1_3 step %c1_3 {
          %x_view_3 = aie.objectfifo.acquire @x_3(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_3 = aie.objectfifo.subview.access %x_view_3[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_3, %out_3, %scratch_3, %c4096_i32_3, %c1024_i32_3, %length_3) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_3(Consume, 1)
          aie.objectfifo.release @out_3(Produce, 1)
        }
        aie.objectfifo.release @words_3(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_4_2 = aie.core(%tile_4_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c4096_i32_4 = arith.constant 4096 : i32
      %c1024_i32_4 = arith.constant 1024 : i32
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        %words_view_4 = aie.objectfifo.acquire @words_4(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_4 = aie.objectfifo.subview.access %words_view_4[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_4 = memref.load %words_4[%c0_4] : memref<1xi32>
        scf.for %t_4 = %c0_4 to %c1_4 step %c1_4 {
          %x_view_4 = aie.objectfifo.acquire @x_4(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_4 = aie.objectfifo.subview.access %x_view_4[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_4 = aie.objectfifo.acquire @out_4(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_4 = aie.objectfifo.subview.access %out_view_4[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_4, %out_4, %scratch_4, %c4096_i32_4, %c1024_i32_4, %length_4) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_4(Consume, 1)
          aie.objectfifo.release @out_4(Produce, 1)
        }
        aie.objectfifo.release @words_4(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_5_2 = aie.core(%tile_5_2) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c4096_i32_5 = arith.constant 4096 : i32
      %c1024_i32_5 = arith.constant 1024 : i32
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        %words_view_5 = aie.objectfifo.acquire @words_5(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_5 = aie.objectfifo.subview.access %words_view_5[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_5 = memref.load %words_5[%c0_5] : memref<1xi32>
        scf.for %t_5 = %c0_5 to %c1_5 step %c1_5 {
          %x_view_5 = aie.objectfifo.acquire @x_5(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_5 = aie.objectfifo.subview.access %x_view_5[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_5 = aie.objectfifo.acquire @out_5(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_5 = aie.objectfifo.subview.access %out_view_5[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_5, %out_5, %scratch_5, %c4096_i32_5, %c1024_i32_5, %length_5) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_5(Consume, 1)
          aie.objectfifo.release @out_5(Produce, 1)
        }
        aie.objectfifo.release @words_5(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_6_2 = aie.core(%tile_6_2) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c4096_i32_6 = arith.constant 4096 : i32
      %c1024_i32_6 = arith.constant 1024 : i32
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        %words_view_6 = aie.objectfifo.acquire @words_6(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_6 = aie.objectfifo.subview.access %words_view_6[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_6 = memref.load %words_6[%c0_6] : memref<1xi32>
        scf.for %t_6 = %c0_6 to %c1_6 step %c1_6 {
          %x_view_6 = aie.objectfifo.acquire @x_6(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_6 = aie.objectfifo.subview.access %x_view_6[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_6 = aie.objectfifo.acquire @out_6(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_6 = aie.objectfifo.subview.access %out_view_6[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_6, %out_6, %scratch_6, %c4096_i32_6, %c1024_i32_6, %length_6) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_6(Consume, 1)
          aie.objectfifo.release @out_6(Produce, 1)
        }
        aie.objectfifo.release @words_6(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_7_2 = aie.core(%tile_7_2) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c4096_i32_7 = arith.constant 4096 : i32
      %c1024_i32_7 = arith.constant 1024 : i32
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        %words_view_7 = aie.objectfifo.acquire @words_7(Consume, 1) : !aie.objectfifosubview<memref<1xi32>>
        %words_7 = aie.objectfifo.subview.access %words_view_7[0] : !aie.objectfifosubview<memref<1xi32>> -> memref<1xi32>
        %length_7 = memref.load %words_7[%c0_7] : memref<1xi32>
        scf.for %t_7 = %c0_7 to %c1_7 step %c1_7 {
          %x_view_7 = aie.objectfifo.acquire @x_7(Consume, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %x_7 = aie.objectfifo.subview.access %x_view_7[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          %out_view_7 = aie.objectfifo.acquire @out_7(Produce, 1) : !aie.objectfifosubview<memref<4096xbf16>>
          %out_7 = aie.objectfifo.subview.access %out_view_7[0] : !aie.objectfifosubview<memref<4096xbf16>> -> memref<4096xbf16>
          func.call @softmax_bf16(%x_7, %out_7, %scratch_7, %c4096_i32_7, %c1024_i32_7, %length_7) : (memref<4096xbf16>, memref<4096xbf16>, memref<1024xf32>, i32, i32, i32) -> ()
          aie.objectfifo.release @x_7(Consume, 1)
          aie.objectfifo.release @out_7(Produce, 1)
        }
        aie.objectfifo.release @words_7(Consume, 1)
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%x_buf: memref<32768xbf16>, %out_buf: memref<32768xbf16>, %words_buf: memref<1xi32>) {
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_0} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_1} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 4096][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 4096][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_2} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 8192][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 8192][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_2} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_3} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 12288][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 12288][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_3} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_4} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 16384][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_4} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 16384][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_4} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_5} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 20480][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_5} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 20480][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_5} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_6} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 24576][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_6} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 24576][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_6} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_7} : memref<1xi32>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 28672][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_7} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 28672][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @x_7} : memref<32768xbf16>
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
