#version 450
// maxpool_bwd times the ReLU mask of the pool's input: dX[b,c,h,w] = (X[b,c,h,w] > 0) * the
// sum, over the windows containing (h, w) in row-major window order, of dY[b,c,oh,ow] where
// argmax == h*W+w (kernel ABI: src/kernels/README.md, "Fused kernels"; ../fused.cl's
// maxpool_bwd_relu with common.cl's maxpool_grad_at); global [B*C*H*W].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * H * W) return;
    if (!(X[i] > 0.0)) {
        dX[i] = 0.0;
        return;
    }
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
