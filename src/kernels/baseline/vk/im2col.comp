#version 450
// col[(c*KH+kh)*KW+kw, (b*OH+oh)*OW+ow] = X[b, c, oh*stride-pad+kh, ow*stride-pad+kw], 0
// outside the image (kernel ABI: src/kernels/README.md); global [B*OH*OW, C*KH*KW].
#include "vk_abi.glsl"

void main()
{
    const int j = int(gl_GlobalInvocationID.x), r = int(gl_GlobalInvocationID.y);
    const int ncols = B * OH * OW;
    if (j >= ncols || r >= C * KH * KW) return;
    const int ow = j % OW, oh = (j / OW) % OH, b = j / (OW * OH);
    const int kw = r % KW, kh = (r / KW) % KH, c = r / (KW * KH);
    const int h = oh * stride - pad + kh, w = ow * stride - pad + kw;
    float v = 0.0;
    if (h >= 0 && h < H && w >= 0 && w < W)
        v = X[((b * C + c) * H + h) * W + w];
    col[r * ncols + j] = v;
}
