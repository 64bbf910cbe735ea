#version 450
// The adjoint of im2col: dX[b,c,h,w] = sum of the col entries im2col read from (b,c,h,w)
// (overwrites dX; a gather, no atomics) (kernel ABI: src/kernels/README.md); global [B*C*H*W].
#include "vk_abi.glsl"
#include "common.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * H * W) return;
    const int w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, b = i / (W * H * C);
    const int ncols = B * OH * OW;
    float acc = 0.0;
    for (int kh = 0; kh < KH; ++kh) {
        const int oh = conv_tap_output(h, pad, kh, stride, OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < KW; ++kw) {
            const int ow = conv_tap_output(w, pad, kw, stride, OW);
            if (ow < 0) continue;
            const int r = (c * KH + kh) * KW + kw;
            acc += col[r * ncols + (b * OH + oh) * OW + ow];
        }
    }
    dX[i] = acc;
}
