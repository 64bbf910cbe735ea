// Helpers shared by the Vulkan compute shaders of every kernel version (GLSL 4.50), the
// counterparts of common.cl's.

// The output coordinate whose window tap k reads input coordinate x (x + pad - k =
// o * stride), or -1 when there is none in [0, n).
int conv_tap_output(const int x, const int pad, const int k, const int stride, const int n)
{
    const int t = x + pad - k;
    if (t < 0 || t % stride != 0) return -1;
    const int o = t / stride;
    return o < n ? o : -1;
}
