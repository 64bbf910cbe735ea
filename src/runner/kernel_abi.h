/* The kernel ABI for the runner's CPU backend. Generated from
 * phonetrain.kernels.abi.KERNEL_ARGS by `python -m phonetrain.kernels.abi_gen`: do not edit
 * (tests/kernels/test_abi_gen.py fails when this file is out of date).
 *
 * KERNEL_ABI(X) calls X(name, kinds, names) for every kernel, in table order: kinds one
 * of i (int), f (float), t (tensor) per argument, names space-separated in ABI order.
 * KABI_NARGS_<name> is the kernel's argument count and KABI_SIG_<name>_<kinds> exists
 * for its kinds only: CPU_KERNEL(name, kinds) (cpu_kernel_ctx.h) names both, so a C
 * kernel whose name, argument count or kinds differ from this table fails to compile. */
#ifndef PHONETRAIN_KERNEL_ABI_H
#define PHONETRAIN_KERNEL_ABI_H

#define KERNEL_ABI_COUNT 49

#define KERNEL_ABI(X) \
    X(gemm_nn, "iiifttft", "M N K alpha A B beta C") \
    X(gemm_nt, "iiifttft", "M N K alpha A B beta C") \
    X(gemm_tn, "iiifttft", "M N K alpha A B beta C") \
    X(bias_add, "iiitt", "B C HW Y bias") \
    X(bias_grad, "iiitt", "B C HW dY db") \
    X(relu_fwd, "itt", "n X Y") \
    X(relu_bwd, "ittt", "n Y dY dX") \
    X(im2col, "iiiiiiiiiitt", "B C H W KH KW stride pad OH OW X col") \
    X(col2im, "iiiiiiiiiitt", "B C H W KH KW stride pad OH OW col dX") \
    X(swap01, "iiitt", "D0 D1 D2 X Y") \
    X(conv2d_fwd, "iiiiiiiiiiittt", "B C H W OC KH KW stride pad OH OW X Wt Y") \
    X(maxpool_fwd, "iiiiiiiittt", "B C H W K stride OH OW X Y argmax") \
    X(maxpool_bwd, "iiiiiiiittt", "B C H W K stride OH OW dY argmax dX") \
    X(softmax_xent, "iitttt", "B C logits labels dlogits row_loss") \
    X(mean, "itt", "n X out") \
    X(sgd_update, "ifffttt", "n lr momentum weight_decay W dW V") \
    X(fill, "ift", "n value X") \
    X(copy, "itt", "n X Y") \
    X(adam_step, "t", "step") \
    X(adam_update, "ifffffittttt", "n lr beta1 beta2 eps weight_decay decoupled step W dW M V") \
    X(dwconv3x3_fwd, "iiiiiiiittt", "B C H W stride pad OH OW X Wt Y") \
    X(dwconv3x3_bwd_data, "iiiiiiiittt", "B C H W stride pad OH OW dY Wt dX") \
    X(dwconv3x3_bwd_weight, "iiiiiiiittt", "B C H W stride pad OH OW X dY dWt") \
    X(batchnorm_stats, "iiiffttttt", "B C HW eps momentum X mean invstd running_mean running_var") \
    X(batchnorm_apply, "iiitttttt", "B C HW X mean invstd gamma beta Y") \
    X(batchnorm_bwd_reduce, "iiitttttt", "B C HW X dY mean invstd dgamma dbeta") \
    X(batchnorm_bwd_data, "iiitttttttt", "B C HW X dY mean invstd gamma dgamma dbeta dX") \
    X(relu6_fwd, "itt", "n X Y") \
    X(relu6_bwd, "ittt", "n Y dY dX") \
    X(add, "ittt", "n A B Y") \
    X(gap_fwd, "iiitt", "B C HW X Y") \
    X(gap_bwd, "iiitt", "B C HW dY dX") \
    X(linear_fwd, "iiiitttt", "B O I act X W bias Y") \
    X(conv_fwd, "iiiiiiiiiiiitttt", "B C H W OC KH KW stride pad OH OW act X weight bias Y") \
    X(linear_bwd_data, "iiiitttt", "B O I relu dY W X dX") \
    X(conv_bwd_data, "iiiiiiiiiiiitttt", "B C H W OC KH KW stride pad OH OW relu dY weight X dX") \
    X(maxpool_bwd_relu, "iiiiiiiitttt", "B C H W K stride OH OW dY argmax X dX") \
    X(softmax_xent_bwd, "iiiittttttt", "B C I relu logits labels W X dlogits dX loss") \
    X(linear_sgd, "iiiffftttttt", "B O I lr momentum weight_decay X dY W V bias Vb") \
    X(conv_sgd, "iiiiiiiiiiiffftttttt", "B C H W OC KH KW stride pad OH OW lr momentum weight_decay X dY weight V bias Vb") \
    X(conv_wgrad_partial, "iiiiiiiiiiiittt", "B C H W OC KH KW stride pad OH OW S X dY part") \
    X(conv_sgd_finish, "iiiiifffttttt", "C OC KH KW S lr momentum weight_decay part weight V bias Vb") \
    X(gconv_stats_fwd, "iiiiiiiiiiiiitttt", "B C H W OC KH KW stride pad OH OW groups tile X weight Z part") \
    X(bn_act_fwd, "iiiiiifftttttttttt", "B C HW tile act res eps momentum Z part gamma beta R Y mean invstd running_mean running_var") \
    X(bn_bwd_sgd, "iiiiffftttttttttt", "B C HW act lr momentum weight_decay X Y dY mean invstd gamma beta Vg Vb dX") \
    X(gconv_bwd_data, "iiiiiiiiiiiiiittttt", "B C H W OC KH KW stride pad OH OW groups act res dY weight X R dX") \
    X(gconv_sgd, "iiiiiiiiiiiiffftttt", "B C H W OC KH KW stride pad OH OW groups lr momentum weight_decay X dY weight V") \
    X(gconv_wgrad_partial, "iiiiiiiiiiiiittt", "B C H W OC KH KW stride pad OH OW groups S X dY part") \
    X(gconv_sgd_finish, "iiiiiifffttt", "C OC KH KW groups S lr momentum weight_decay part weight V") \

enum {
    KABI_NARGS_gemm_nn = 8,
    KABI_SIG_gemm_nn_iiifttft = 8,
    KABI_NARGS_gemm_nt = 8,
    KABI_SIG_gemm_nt_iiifttft = 8,
    KABI_NARGS_gemm_tn = 8,
    KABI_SIG_gemm_tn_iiifttft = 8,
    KABI_NARGS_bias_add = 5,
    KABI_SIG_bias_add_iiitt = 5,
    KABI_NARGS_bias_grad = 5,
    KABI_SIG_bias_grad_iiitt = 5,
    KABI_NARGS_relu_fwd = 3,
    KABI_SIG_relu_fwd_itt = 3,
    KABI_NARGS_relu_bwd = 4,
    KABI_SIG_relu_bwd_ittt = 4,
    KABI_NARGS_im2col = 12,
    KABI_SIG_im2col_iiiiiiiiiitt = 12,
    KABI_NARGS_col2im = 12,
    KABI_SIG_col2im_iiiiiiiiiitt = 12,
    KABI_NARGS_swap01 = 5,
    KABI_SIG_swap01_iiitt = 5,
    KABI_NARGS_conv2d_fwd = 14,
    KABI_SIG_conv2d_fwd_iiiiiiiiiiittt = 14,
    KABI_NARGS_maxpool_fwd = 11,
    KABI_SIG_maxpool_fwd_iiiiiiiittt = 11,
    KABI_NARGS_maxpool_bwd = 11,
    KABI_SIG_maxpool_bwd_iiiiiiiittt = 11,
    KABI_NARGS_softmax_xent = 6,
    KABI_SIG_softmax_xent_iitttt = 6,
    KABI_NARGS_mean = 3,
    KABI_SIG_mean_itt = 3,
    KABI_NARGS_sgd_update = 7,
    KABI_SIG_sgd_update_ifffttt = 7,
    KABI_NARGS_fill = 3,
    KABI_SIG_fill_ift = 3,
    KABI_NARGS_copy = 3,
    KABI_SIG_copy_itt = 3,
    KABI_NARGS_adam_step = 1,
    KABI_SIG_adam_step_t = 1,
    KABI_NARGS_adam_update = 12,
    KABI_SIG_adam_update_ifffffittttt = 12,
    KABI_NARGS_dwconv3x3_fwd = 11,
    KABI_SIG_dwconv3x3_fwd_iiiiiiiittt = 11,
    KABI_NARGS_dwconv3x3_bwd_data = 11,
    KABI_SIG_dwconv3x3_bwd_data_iiiiiiiittt = 11,
    KABI_NARGS_dwconv3x3_bwd_weight = 11,
    KABI_SIG_dwconv3x3_bwd_weight_iiiiiiiittt = 11,
    KABI_NARGS_batchnorm_stats = 10,
    KABI_SIG_batchnorm_stats_iiiffttttt = 10,
    KABI_NARGS_batchnorm_apply = 9,
    KABI_SIG_batchnorm_apply_iiitttttt = 9,
    KABI_NARGS_batchnorm_bwd_reduce = 9,
    KABI_SIG_batchnorm_bwd_reduce_iiitttttt = 9,
    KABI_NARGS_batchnorm_bwd_data = 11,
    KABI_SIG_batchnorm_bwd_data_iiitttttttt = 11,
    KABI_NARGS_relu6_fwd = 3,
    KABI_SIG_relu6_fwd_itt = 3,
    KABI_NARGS_relu6_bwd = 4,
    KABI_SIG_relu6_bwd_ittt = 4,
    KABI_NARGS_add = 4,
    KABI_SIG_add_ittt = 4,
    KABI_NARGS_gap_fwd = 5,
    KABI_SIG_gap_fwd_iiitt = 5,
    KABI_NARGS_gap_bwd = 5,
    KABI_SIG_gap_bwd_iiitt = 5,
    KABI_NARGS_linear_fwd = 8,
    KABI_SIG_linear_fwd_iiiitttt = 8,
    KABI_NARGS_conv_fwd = 16,
    KABI_SIG_conv_fwd_iiiiiiiiiiiitttt = 16,
    KABI_NARGS_linear_bwd_data = 8,
    KABI_SIG_linear_bwd_data_iiiitttt = 8,
    KABI_NARGS_conv_bwd_data = 16,
    KABI_SIG_conv_bwd_data_iiiiiiiiiiiitttt = 16,
    KABI_NARGS_maxpool_bwd_relu = 12,
    KABI_SIG_maxpool_bwd_relu_iiiiiiiitttt = 12,
    KABI_NARGS_softmax_xent_bwd = 11,
    KABI_SIG_softmax_xent_bwd_iiiittttttt = 11,
    KABI_NARGS_linear_sgd = 12,
    KABI_SIG_linear_sgd_iiiffftttttt = 12,
    KABI_NARGS_conv_sgd = 20,
    KABI_SIG_conv_sgd_iiiiiiiiiiiffftttttt = 20,
    KABI_NARGS_conv_wgrad_partial = 15,
    KABI_SIG_conv_wgrad_partial_iiiiiiiiiiiittt = 15,
    KABI_NARGS_conv_sgd_finish = 13,
    KABI_SIG_conv_sgd_finish_iiiiifffttttt = 13,
    KABI_NARGS_gconv_stats_fwd = 17,
    KABI_SIG_gconv_stats_fwd_iiiiiiiiiiiiitttt = 17,
    KABI_NARGS_bn_act_fwd = 18,
    KABI_SIG_bn_act_fwd_iiiiiifftttttttttt = 18,
    KABI_NARGS_bn_bwd_sgd = 17,
    KABI_SIG_bn_bwd_sgd_iiiiffftttttttttt = 17,
    KABI_NARGS_gconv_bwd_data = 19,
    KABI_SIG_gconv_bwd_data_iiiiiiiiiiiiiittttt = 19,
    KABI_NARGS_gconv_sgd = 19,
    KABI_SIG_gconv_sgd_iiiiiiiiiiiiffftttt = 19,
    KABI_NARGS_gconv_wgrad_partial = 16,
    KABI_SIG_gconv_wgrad_partial_iiiiiiiiiiiiittt = 16,
    KABI_NARGS_gconv_sgd_finish = 12,
    KABI_SIG_gconv_sgd_finish_iiiiiifffttt = 12,
};

#endif
