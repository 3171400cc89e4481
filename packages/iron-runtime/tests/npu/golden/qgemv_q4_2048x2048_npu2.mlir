// IRON design: QGEMV(M=2048, K=2048, bits=4, group=32, row_bytes=1280, num_aie_columns=8, tile_m=256, tile_k=128) on npu2; mlir-aie v1.4.1
module {
  aie.device(npu2) @main {
    func.func private @qmatmul_f32_zero(memref<256xf32>, i32) attributes {link_with = "qmatmul.o"}
    func.func private @qgemv_acc(memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) attributes {link_with = "qmatmul.o"}
    func.func private @qmatmul_bf16_store(memref<256xf32>, memref<256xbf16>, i32) attributes {link_with = "qmatmul.o"}
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
    aie.objectfifo @w_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_4(%shim_noc_tile_4_0, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_4(%shim_noc_tile_4_0, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_4(%tile_4_2, {%shim_noc_tile_4_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_5(%shim_noc_tile_5_0, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_5(%shim_noc_tile_5_0, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_5(%tile_5_2, {%shim_noc_tile_5_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_6(%shim_noc_tile_6_0, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_6(%shim_noc_tile_6_0, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_6(%tile_6_2, {%shim_noc_tile_6_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    aie.objectfifo @w_7(%shim_noc_tile_7_0, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_7(%shim_noc_tile_7_0, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
    aie.objectfifo @out_7(%tile_7_2, {%shim_noc_tile_7_0}, 2 : i32) : !aie.objectfifo<memref<256xbf16>>
    %acc_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0"} : memref<256xf32>
    %acc_1 = aie.buffer(%tile_1_2) {sym_name = "acc_1"} : memref<256xf32>
    %acc_2 = aie.buffer(%tile_2_2) {sym_name = "acc_2"} : memref<256xf32>
    %acc_3 = aie.buffer(%tile_3_2) {sym_name = "acc_3"} : memref<256xf32>
    %acc_4 = aie.buffer(%tile_4_2) {sym_name = "acc_4"} : memref<256xf32>
    %acc_5 = aie.buffer(%tile_5_2) {sym_name = "acc_5"} : memref<256xf32>
    %acc_6 = aie.buffer(%tile_6_2) {sym_name = "acc_6"} : memref<256xf32>
    %acc_7 = aie.buffer(%tile_7_2) {sym_name = "acc_7"} : memref<256xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c16 = arith.constant 16 : index
      %c256_i32 = arith.constant 256 : i32
      %c128_i32 = arith.constant 128 : i32
      %c4_i32 = arith.constant 4 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %r = %c0 to %c1 step %c1 {
          func.call @qmatmul_f32_zero(%acc_0, %c256_i32) : (memref<256xf32>, i32) -> ()
          scf.for %k = %c0 to %c16 step %c1 {
            %w_view = aie.objectfifo.acquire @w_0(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w = aie.objectfifo.subview.access %w_view[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view = aie.objectfifo.acquire @x_0(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x = aie.objectfifo.subview.access %x_view[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w, %x, %acc_0, %c256_i32, %c128_i32, %c4_i32, %c32_i32) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_0(Consume, 1)
            aie.objectfifo.release @x_0(Consume, 1)
          }
          %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_0, %out, %c256_i32) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c16_1 = arith.constant 16 : index
      %c256_i32_1 = arith.constant 256 : i32
      %c128_i32_1 = arith.constant 128 : i32
      %c4_i32_1 = arith.constant 4 : i32
      %c32_i32_1 = arith.constant 32 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %r_1 = %c0_1 to %c1_1 step %c1_1 {
          func.call @qmatmul_f32_zero(%acc_1, %c256_i32_1) : (memref<256xf32>, i32) -> ()
          scf.for %k_1 = %c0_1 to %c16_1 step %c1_1 {
            %w_view_1 = aie.objectfifo.acquire @w_1(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_1 = aie.objectfifo.subview.access %w_view_1[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_1 = aie.objectfifo.acquire @x_1(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_1 = aie.objectfifo.subview.access %x_view_1[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_1, %x_1, %acc_1, %c256_i32_1, %c128_i32_1, %c4_i32_1, %c32_i32_1) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_1(Consume, 1)
            aie.objectfifo.release @x_1(Consume, 1)
          }
          %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_1, %out_1, %c256_i32_1) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_1(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c16_2 = arith.constant 16 : index
      %c256_i32_2 = arith.constant 256 : i32
      %c128_i32_2 = arith.constant 128 : i32
      %c4_i32_2 = arith.constant 4 : i32
      %c32_i32_2 = arith.constant 32 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %r_2 = %c0_2 to %c1_2 step %c1_2 {
          func.call @qmatmul_f32_zero(%acc_2, %c256_i32_2) : (memref<256xf32>, i32) -> ()
          scf.for %k_2 = %c0_2 to %c16_2 step %c1_2 {
            %w_view_2 = aie.objectfifo.acquire @w_2(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_2 = aie.objectfifo.subview.access %w_view_2[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_2 = aie.objectfifo.acquire @x_2(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_2 = aie.objectfifo.subview.access %x_view_2[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_2, %x_2, %acc_2, %c256_i32_2, %c128_i32_2, %c4_i32_2, %c32_i32_2) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_2(Consume, 1)
            aie.objectfifo.release @x_2(Consume, 1)
          }
          %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_2, %out_2, %c256_i32_2) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_2(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c16_3 = arith.constant 16 : index
      %c256_i32_3 = arith.constant 256 : i32
      %c128_i32_3 = arith.constant 128 : i32
      %c4_i32_3 = arith.constant 4 : i32
      %c32_i32_3 = arith.constant 32 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %r_3 = %c0_3 to %c1_3 step %c1_3 {
          func.call @qmatmul_f32_zero(%acc_3, %c256_i32_3) : (memref<256xf32>, i32) -> ()
          scf.for %k_3 = %c0_3 to %c16_3 step %c1_3 {
            %w_view_3 = aie.objectfifo.acquire @w_3(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_3 = aie.objectfifo.subview.access %w_view_3[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_3 = aie.objectfifo.acquire @x_3(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_3 = aie.objectfifo.subview.access %x_view_3[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_3, %x_3, %acc_3, %c256_i32_3, %c128_i32_3, %c4_i32_3, %c32_i32_3) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_3(Consume, 1)
            aie.objectfifo.release @x_3(Consume, 1)
          }
          %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_3, %out_3, %c256_i32_3) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_3(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_4_2 = aie.core(%tile_4_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c16_4 = arith.constant 16 : index
      %c256_i32_4 = arith.constant 256 : i32
      %c128_i32_4 = arith.constant 128 : i32
      %c4_i32_4 = arith.constant 4 : i32
      %c32_i32_4 = arith.constant 32 : i32
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        scf.for %r_4 = %c0_4 to %c1_4 step %c1_4 {
          func.call @qmatmul_f32_zero(%acc_4, %c256_i32_4) : (memref<256xf32>, i32) -> ()
          scf.for %k_4 = %c0_4 to %c16_4 step %c1_4 {
            %w_view_4 = aie.objectfifo.acquire @w_4(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_4 = aie.objectfifo.subview.access %w_view_4[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_4 = aie.objectfifo.acquire @x_4(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_4 = aie.objectfifo.subview.access %x_view_4[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_4, %x_4, %acc_4, %c256_i32_4, %c128_i32_4, %c4_i32_4, %c32_i32_4) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_4(Consume, 1)
            aie.objectfifo.release @x_4(Consume, 1)
          }
          %out_view_4 = aie.objectfifo.acquire @out_4(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_4 = aie.objectfifo.subview.access %out_view_4[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_4, %out_4, %c256_i32_4) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_4(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_5_2 = aie.core(%tile_5_2) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c16_5 = arith.constant 16 : index
      %c256_i32_5 = arith.constant 256 : i32
      %c128_i32_5 = arith.constant 128 : i32
      %c4_i32_5 = arith.constant 4 : i32
      %c32_i32_5 = arith.constant 32 : i32
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        scf.for %r_5 = %c0_5 to %c1_5 step %c1_5 {
          func.call @qmatmul_f32_zero(%acc_5, %c256_i32_5) : (memref<256xf32>, i32) -> ()
          scf.for %k_5 = %c0_5 to %c16_5 step %c1_5 {
            %w_view_5 = aie.objectfifo.acquire @w_5(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_5 = aie.objectfifo.subview.access %w_view_5[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_5 = aie.objectfifo.acquire @x_5(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_5 = aie.objectfifo.subview.access %x_view_5[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_5, %x_5, %acc_5, %c256_i32_5, %c128_i32_5, %c4_i32_5, %c32_i32_5) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_5(Consume, 1)
            aie.objectfifo.release @x_5(Consume, 1)
          }
          %out_view_5 = aie.objectfifo.acquire @out_5(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_5 = aie.objectfifo.subview.access %out_view_5[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_5, %out_5, %c256_i32_5) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_5(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_6_2 = aie.core(%tile_6_2) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c16_6 = arith.constant 16 : index
      %c256_i32_6 = arith.constant 256 : i32
      %c128_i32_6 = arith.constant 128 : i32
      %c4_i32_6 = arith.constant 4 : i32
      %c32_i32_6 = arith.constant 32 : i32
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        scf.for %r_6 = %c0_6 to %c1_6 step %c1_6 {
          func.call @qmatmul_f32_zero(%acc_6, %c256_i32_6) : (memref<256xf32>, i32) -> ()
          scf.for %k_6 = %c0_6 to %c16_6 step %c1_6 {
            %w_view_6 = aie.objectfifo.acquire @w_6(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_6 = aie.objectfifo.subview.access %w_view_6[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_6 = aie.objectfifo.acquire @x_6(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_6 = aie.objectfifo.subview.access %x_view_6[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_6, %x_6, %acc_6, %c256_i32_6, %c128_i32_6, %c4_i32_6, %c32_i32_6) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_6(Consume, 1)
            aie.objectfifo.release @x_6(Consume, 1)
          }
          %out_view_6 = aie.objectfifo.acquire @out_6(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_6 = aie.objectfifo.subview.access %out_view_6[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_6, %out_6, %c256_i32_6) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_6(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_7_2 = aie.core(%tile_7_2) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c16_7 = arith.constant 16 : index
      %c256_i32_7 = arith.constant 256 : i32
      %c128_i32_7 = arith.constant 128 : i32
      %c4_i32_7 = arith.constant 4 : i32
      %c32_i32_7 = arith.constant 32 : i32
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        scf.for %r_7 = %c0_7 to %c1_7 step %c1_7 {
          func.call @qmatmul_f32_zero(%acc_7, %c256_i32_7) : (memref<256xf32>, i32) -> ()
          scf.for %k_7 = %c0_7 to %c16_7 step %c1_7 {
            %w_view_7 = aie.objectfifo.acquire @w_7(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_7 = aie.objectfifo.subview.access %w_view_7[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_7 = aie.objectfifo.acquire @x_7(Consume, 1) : !aie.objectfifosubview<memref<128xbf16>>
            %x_7 = aie.objectfifo.subview.access %x_view_7[0] : !aie.objectfifosubview<memref<128xbf16>> -> memref<128xbf16>
            func.call @qgemv_acc(%w_7, %x_7, %acc_7, %c256_i32_7, %c128_i32_7, %c4_i32_7, %c32_i32_7) : (memref<20480xi8>, memref<128xbf16>, memref<256xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_7(Consume, 1)
            aie.objectfifo.release @x_7(Consume, 1)
          }
          %out_view_7 = aie.objectfifo.acquire @out_7(Produce, 1) : !aie.objectfifosubview<memref<256xbf16>>
          %out_7 = aie.objectfifo.subview.access %out_view_7[0] : !aie.objectfifosubview<memref<256xbf16>> -> memref<256xbf16>
          func.call @qmatmul_bf16_store(%acc_7, %out_7, %c256_i32_7) : (memref<256xf32>, memref<256xbf16>, i32) -> ()
          aie.objectfifo.release @out_7(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%w_buf: memref<2621440xi8>, %x_buf: memref<2048xbf16>, %out_buf: memref<2048xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 0][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_0} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_0} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 256][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 327680][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_1} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_1} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 512][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 655360][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_2} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_2} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 768][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 983040][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_3} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_3} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1024][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_4} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1310720][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_4} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_4} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1280][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_5} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1638400][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_5} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_5} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1536][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_6} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1966080][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_6} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_6} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1792][1, 1, 1, 256][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_7} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 2293760][1, 16, 256, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_7} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_7} : memref<2048xbf16>
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
