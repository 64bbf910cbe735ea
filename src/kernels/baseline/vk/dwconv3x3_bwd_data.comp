#version 450
// dX[b,c,h,w] = sum of Wt[c,kh,kw] * dY[b,c,oh,ow] over the taps that read (h, w); one invocation per input element (a gather) (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [B*C*H*W].
#include "vk_abi.glsl"
#include "common.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * H * W) return;
    const int w = i % W, h = (i / W) % H, bc = i / (W * H);
    const int y0 = bc * OH * OW, w0 = (bc % C) * 9;
    float acc = 0.0;
    for (int kh = 0; kh < 3; ++kh) {
        const int oh = conv_tap_output(h, pad, kh, stride, OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < 3; ++kw) {
            const int ow = conv_tap_output(w, pad, kw, stride, OW);
            if (ow < 0) continue;
            acc += Wt[w0 + kh * 3 + kw] * dY[y0 + oh * OW + ow];
        }
    }
    dX[i] = acc;
}
