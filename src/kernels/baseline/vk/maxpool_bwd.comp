#version 450
// dX[b,c,h,w] = sum of dY over the windows whose argmax is h*W+w (overwrites dX; a gather)
// (kernel ABI: src/kernels/README.md); global [B*C*H*W].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * H * W) return;
    const int w = i % W, h = (i / W) % H, base = (i / (W * H)) * OH * OW;
    const int self = h * W + w;
    const int oh0 = h < K ? 0 : (h - K) / stride + 1, oh1 = min(h / stride, OH - 1);
    const int ow0 = w < K ? 0 : (w - K) / stride + 1, ow1 = min(w / stride, OW - 1);
    float acc = 0.0;
    for (int oh = oh0; oh <= oh1; ++oh)
        for (int ow = ow0; ow <= ow1; ++ow)
            if (argmax[base + oh * OW + ow] == self)
                acc += dY[base + oh * OW + ow];
    dX[i] = acc;
}
