// fused (Vulkan): the activation helpers of the fused batch-norm shaders (../fused_bn.cl's
// bn_act, bn_act_passes and chan_merge). Activation codes: 0 none, 1 ReLU, 2 ReLU6.

// act(v) for the activation codes above.
float bn_act(const float v, const int act)
{
    if (act == 1) return v > 0.0 ? v : 0.0;
    if (act == 2) return min(max(v, 0.0), 6.0);
    return v;
}

// Whether the gradient passes the activation whose output is y (relu_bwd / relu6_bwd).
bool bn_act_passes(const float y, const int act)
{
    if (act == 1) return y > 0.0;
    if (act == 2) return y > 0.0 && y < 6.0;
    return true;
}

// Merges the statistics a = (count, mean, M2, -) of one set of values with those b of
// another, disjoint set: the pairwise update of Chan, Golub & LeVeque, "Updating formulae and
// a pairwise algorithm for computing sample variances" (1979): d = mean_b - mean_a,
// n = n_a + n_b, mean = mean_a + d * n_b / n, M2 = M2_a + M2_b + d^2 * n_a * n_b / n. An
// empty set (count 0) leaves the other unchanged.
vec4 chan_merge(const vec4 a, const vec4 b)
{
    if (b.x == 0.0) return a;
    if (a.x == 0.0) return b;
    const float n = a.x + b.x, d = b.y - a.y, f = b.x / n;
    return vec4(n, a.y + d * f, a.z + (b.z + d * d * a.x * f), 0.0);
}
