// The work-group sum of the reduction shaders (common.cl's wg_sum): one value per invocation
// of dimension 0, a tree in shared memory; every invocation of the work-group must call it.

// The largest work-group of the reductions (common.cl's RL_MAX).
#define RL_MAX 256
shared float pt_scratch[RL_MAX];

float wg_sum(const float v)
{
    const uint l = gl_LocalInvocationID.x;
    pt_scratch[l] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
        if (l < s) pt_scratch[l] += pt_scratch[l + s];
        barrier();
    }
    const float total = pt_scratch[0];
    barrier();
    return total;
}
