// The per-pair math of every rotation op, shared by the CPU and CUDA kernels (ROMEM.md).
//
// A complex pair j of a split-halves vector is (x[j], x[n + j]). Rot(x, theta) rotates it by
// theta_j radians; the relation of ChronoR/DistMult is a *real* diagonal rho = w * w_hat, so it
// scales the real and the imaginary coordinate of a pair by different factors.
#pragma once

#if defined(__CUDACC__)
#define ROTMEM_HD __host__ __device__ __forceinline__
#else
#define ROTMEM_HD inline
#endif

namespace rotmem {

// Clamps of the temporal spectrum, exactly as rotmem/ops/reference.py (gradient 0 below them).
constexpr double kLogSMin = -20.72326583694641;     // s = exp(log_s) >= 1e-9 rad/day
constexpr double kLogBaseMin = 0.6931471805599453;  // base = exp(log_base) >= 2

// y = Rot(x, theta) for one pair, given c = cos(theta), s = sin(theta).
template <typename T>
ROTMEM_HD void rotate_pair(T x_re, T x_im, T c, T s, T& y_re, T& y_im) {
  y_re = x_re * c - x_im * s;
  y_im = x_re * s + x_im * c;
}

// Gradients of y = Rot(x, theta) given dL/dy = g: dx = Rot(g, -theta), dtheta = <g, J y>.
template <typename T>
ROTMEM_HD void rotate_pair_backward(T g_re, T g_im, T x_re, T x_im, T c, T s, T& dx_re, T& dx_im, T& dtheta) {
  T y_re, y_im;
  rotate_pair(x_re, x_im, c, s, y_re, y_im);
  dx_re = g_re * c + g_im * s;
  dx_im = -g_re * s + g_im * c;
  dtheta = g_im * y_re - g_re * y_im;
}

// q = Rot(Rot(h, theta) * rho, -theta) for one pair (the unrotated query).
template <typename T>
ROTMEM_HD void query_pair(T h_re, T h_im, T rho_re, T rho_im, T c, T s, T& q_re, T& q_im) {
  T a_re, a_im;
  rotate_pair(h_re, h_im, c, s, a_re, a_im);
  const T b_re = a_re * rho_re;
  const T b_im = a_im * rho_im;
  q_re = b_re * c + b_im * s;
  q_im = b_im * c - b_re * s;
}

// Gradients of the unrotated query for one pair given dL/dq = g.
// With a = Rot(h, theta), b = rho * a, q = Rot(b, -theta):
//   db = Rot(g, theta), drho = db * a, da = db * rho, dh = Rot(da, -theta),
//   dtheta = <g, -J q> + <db, rho * J a>   (J rotates a pair by +90 degrees).
template <typename T>
struct QueryPairGrad {
  T h_re, h_im, rho_re, rho_im, theta;
};

template <typename T>
ROTMEM_HD QueryPairGrad<T> query_pair_backward(T g_re, T g_im, T h_re, T h_im, T rho_re, T rho_im, T c, T s) {
  T a_re, a_im, db_re, db_im;
  rotate_pair(h_re, h_im, c, s, a_re, a_im);
  rotate_pair(g_re, g_im, c, s, db_re, db_im);
  const T q_re = a_re * rho_re * c + a_im * rho_im * s;
  const T q_im = a_im * rho_im * c - a_re * rho_re * s;
  const T da_re = db_re * rho_re;
  const T da_im = db_im * rho_im;
  QueryPairGrad<T> out;
  out.rho_re = db_re * a_re;
  out.rho_im = db_im * a_im;
  out.h_re = da_re * c + da_im * s;
  out.h_im = da_im * c - da_re * s;
  out.theta = g_re * q_im - g_im * q_re + da_im * a_re - da_re * a_im;
  return out;
}

}  // namespace rotmem
