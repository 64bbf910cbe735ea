#version 450
// Depthwise 3x3: Y[b,c,oh,ow] = sum over kh, kw of Wt[c,kh,kw] * X[b,c,oh*stride-pad+kh, ow*stride-pad+kw], 0 outside the image; one invocation per output (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [B*C*OH*OW].
#include "vk_abi.glsl"

void main()
{
    const int o = int(gl_GlobalInvocationID.x);
    if (o >= B * C * OH * OW) return;
    const int ow = o % OW, oh = (o / OW) % OH, bc = o / (OW * OH);
    const int x0 = bc * H * W, w0 = (bc % C) * 9;
    float acc = 0.0;
    for (int kh = 0; kh < 3; ++kh) {
        const int h = oh * stride - pad + kh;
        for (int kw = 0; kw < 3; ++kw) {
            const int wi = ow * stride - pad + kw;
            const float v = (h >= 0 && h < H && wi >= 0 && wi < W) ? X[x0 + h * W + wi] : 0.0;
            acc += Wt[w0 + kh * 3 + kw] * v;
        }
    }
    Y[o] = acc;
}
