#version 450
// Y = max over the K x K window at (oh*stride, ow*stride); argmax = flat index h*W+w of the
// first maximum (kernel ABI: src/kernels/README.md); global [B*C*OH*OW].
#include "vk_abi.glsl"

void main()
{
    const int o = int(gl_GlobalInvocationID.x);
    if (o >= B * C * OH * OW) return;
    const int ow = o % OW, oh = (o / OW) % OH, base = (o / (OW * OH)) * H * W;
    const int h0 = oh * stride, w0 = ow * stride;
    const int h1 = min(h0 + K, H), w1 = min(w0 + K, W);
    int best = h0 * W + w0;
    float m = X[base + best];
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w)
            if (X[base + h * W + w] > m) {
                m = X[base + h * W + w];
                best = h * W + w;
            }
    Y[o] = m;
    argmax[o] = best;
}
