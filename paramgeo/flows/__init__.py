"""Gradient flow and gradient descent through any parameterization, their push-forward to the
predictor, the quotient flow, conserved quantities, and the vanishing-initialisation limit.

For a loss ell on predictors and L(theta) = ell(phi(theta)):

* gradient flow        d theta / dt = -grad L(theta) = -J(theta)^T grad ell(phi(theta)),
  integrated with ``scipy.integrate.solve_ivp`` (:func:`gradient_flow`);
* gradient descent     theta_{t+1} = theta_t - eta_t J(theta_t)^T grad ell(phi(theta_t)), with
  an optional schedule eta_t and optional minibatch (stochastic) gradients drawn from a seeded
  generator (:func:`gradient_descent`);
* push-forward         d beta / dt = -J J^T grad ell(beta), beta = phi(theta): the flow the
  parameterization induces on predictors, with the metric J J^T (:func:`predictor_flow`);
* quotient flow        d theta / dt = -h(grad L), h the horizontal projection: the Riemannian
  gradient flow of ell on the quotient Theta / G with the quotient metric, lifted horizontally
  (:func:`quotient_flow`); it equals the gradient flow because grad L = J^T grad ell lies in
  range J^T, orthogonal to ker J which contains the vertical space (:func:`compare_flows`);
* conserved quantities theta^T S theta for every symmetric S in the Lie algebra of a linear
  symmetry action (:func:`conserved_quantities`), recorded along every trajectory;
* the early-stage alignment of logistic gradient descent with the max-margin direction: the
  time T(delta) to alignment error delta, its law exp(c / delta) with a closed-form c, and the
  radial/tangential split of each step (:func:`alignment_times`, :func:`fit_alignment_law`);
* the dual of smoothed sign descent: its KL recursion, Hoeffding bound and rate envelope, its
  KKT slackness (:func:`sign_dual`), the limit's two endpoints (:func:`endpoint_limits`) and
  the crossover of a fixed smoothing to gradient descent (:func:`fixed_epsilon`);
* early stopping under label flips: the rate the ridge deterministic equivalent predicts for
  the oracle stop, and the calibration of logistic to 0-1 excess risk along the run
  (:func:`oracle_rate_theory`, :func:`calibration_path`), the oracle-stopped rate route by
  route with the loss's efficiency ratio, the best interpolator's floor by Gordon's comparison,
  the sample counts and a Le Cam / Fano minimax lower bound (:func:`rate_decomposition`,
  :func:`efficiency_ratio`, :func:`interpolator_floor`, :func:`sample_counts`,
  :func:`minimax_lower_bound`), and Assouad's nonparametric lower bound over a source ball of
  Bayes directions with its closed-form rate (:func:`nonparametric_lower_bound`,
  :func:`nonparametric_rate`) and its local version around the model (:func:`local_lower_bound`);
* negative ridge against shifted GD: the risk gain over (d, N) with fitted exponents and the
  hold-out choice of (shift, stop) with its transfer (:func:`risk_gain`,
  :func:`holdout_selection`);
* many structure-matrix modes trained by GD, noisy SGD and Adam, and the fitted exponent's
  dependence on the window and the initial scale (:func:`train_modes`,
  :func:`window_exponents`, :func:`local_exponent`);
* positive quadratic networks x^T U U^T x: the spectral initialiser, the population curvature
  and its deviation over N, local linear convergence of GD from the spectral start
  (:func:`spectral_init`, :func:`curvature_deviation`, :func:`local_convergence`), and the
  O(eta) gap of finite-step descent to the Bregman projection (:func:`step_size_gap`);
* the flow-invariant coordinate subspaces of deep diagonal networks and the flow's visits to
  them beside Algorithm 1 (:func:`invariant_residual`, :func:`sim_visits`);
* the mean-field stationary measure of noisy gradient descent on a weight-decayed two-layer
  ReLU network: the self-consistent Gibbs density, its modes (directions), their masses,
  widths and ternary activation patterns, and its zero-temperature limit
  (:func:`stationary_measure`, :func:`zero_temperature_limit`, :func:`particle_langevin`);
* the vanishing-initialisation limit of diagonal (commuting) parameterizations: the
  saddle-to-saddle sequence of Pesme and Flammarion (2023) (:func:`saddle_to_saddle`);
* online SGD on attention-indexed models: the d x d engine with its order-parameter equations
  (:func:`online_sgd`, :func:`compare_with_odes`, :func:`compare_with_hierarchy`), and the
  matrix-free engines for multi-head and two-layer models batched over seeds, with the power of
  a weak-recovery scaling fit (:func:`multihead_sgd`, :func:`two_layer_sgd`,
  :func:`scaling_separation`) and the overlap's exponential escape from its random start
  (:func:`overlap_growth`) with its leading-order rate (:func:`escape_rate`) and the SGD
  noise's order-eta^2 correction to the plateau and the rate, d -> infinity
  (:func:`noisy_escape`, :func:`noise_drift`, :func:`step_coefficients`), with the
  finite-d drift of the overlap that it leaves out (:func:`finite_d_drift`).

The gradient is always the chain rule through the plugin's VJP (``paramgeo.losses.pullback``),
never a dense Jacobian. Flows and descent return a :class:`Trajectory`.

Layout: gradient flow, :class:`Trajectory` and the conserved quantities live in the core modules
:mod:`paramgeo.dynamics.trajectory` and :mod:`paramgeo.symmetry.conserved` (the mirror engine integrates gradient
flow too); :mod:`.descent`, :mod:`.push_forward` and :mod:`.saddle` build on them. Every name is
re-exported here. The choice of integrator (LSODA by default) is explained in
:mod:`paramgeo.dynamics.trajectory`.

References: Kunin, Sagastuy-Brena, Ganguli, Yamins, Tanaka (2021), "Neural mechanics: symmetry
and broken conservation laws in deep learning dynamics"; Marcotte, Gribonval, Peyre (2023),
"Abide by the law and follow the flow: conservation laws for gradient flows"; Pesme,
Flammarion (2023), "Saddle-to-saddle dynamics in diagonal linear networks"; Woodworth et al.
(2020), "Kernel and rich regimes in overparametrized models"; Absil, Mahony, Sepulchre (2008),
"Optimization algorithms on matrix manifolds" (horizontal lifts of Riemannian gradients).
"""

from ..symmetry.conserved import ConservedQuantities, conserved_quantities
from ..dynamics.trajectory import IMPLICIT_METHODS, MAX_IMPLICIT_DIM, Trajectory, gradient_flow
from .alignment import (
    AlignmentLaw,
    AlignmentRun,
    alignment_times,
    fit_alignment_law,
    predicted_constant,
)
from .descent import gradient_descent, schedule
from .label_flips import (
    CalibrationPath,
    RateTheory,
    calibration_path,
    logistic_optimum,
    logistic_risk,
    oracle_rate_theory,
    ridge_equivalent,
)
from .invariant_sets import SIMVisits, invariant_residual, sim_visits
from .logistic_separation import (
    GramSample,
    LogisticDesign,
    SampleLaws,
    SeparationRun,
    TailInterpolator,
    fit_laws,
    gram_sample,
    kernel_gd,
    kernel_max_margin,
    sample_counts_logistic,
    separation,
    tail_interpolator,
    zero_one_excess,
)
from .minimax import (
    LocalBound,
    NonparametricBound,
    class_radius,
    cube_means,
    excess_slope,
    local_lower_bound,
    local_means,
    mixture_kl,
    nonparametric_lower_bound,
    nonparametric_rate,
)
from .oracle_rates import (
    InterpolatorExcess,
    EquivalentCheck,
    MinimaxBound,
    RateDecomposition,
    SampleCounts,
    best_interpolator,
    efficiency_ratio,
    equivalent_check,
    interpolator_excess,
    interpolator_floor,
    minimax_lower_bound,
    min_norm_cone,
    rate_decomposition,
    sample_count,
    sample_counts,
    square_loss_estimators,
)
from .mean_field import (
    LangevinRun,
    StationaryMeasure,
    ZeroTemperature,
    arccos_kernel,
    exact_modes,
    linear_response,
    particle_langevin,
    sample_neurons,
    single_point_residual,
    sphere_grid,
    stationary_measure,
    zero_temperature_limit,
)
from .mode_training import (
    ModeTraining,
    WindowExponents,
    local_exponent,
    train_modes,
    window_exponents,
)
from .negative_ridge import (
    GainCheck,
    HoldoutTransfer,
    RiskGain,
    SpikeGain,
    fit_plane,
    gain_check,
    gain_over_spike,
    holdout_selection,
    risk_gain,
)
from .quadratic_net import (
    CurvatureDeviation,
    LocalConvergence,
    curvature_deviation,
    empirical_hessian,
    local_convergence,
    population_hessian,
    quadratic_measurements,
    spectral_init,
    StepSizeGap,
    step_size_gap,
)
from .spiked_equivalent import (
    EquivalentRisks,
    SpikedSpectrum,
    effective_penalty,
    equivalent_filter_risks,
    equivalent_risk,
    gain_asymptote,
    spiked_spectrum,
)
from .smoothed_sign import (
    EndpointLimits,
    FixedEpsilonRun,
    SignDualRun,
    dual_objective,
    endpoint_limits,
    fixed_epsilon,
    sign_dual,
)
from .push_forward import (
    FlowComparison,
    PredictorPath,
    compare_flows,
    mirror_flow,
    predictor_flow,
    predictor_velocity,
    quotient_flow,
)
from .saddle import (
    SaddleSequence,
    VanishingInitLimit,
    jump_times,
    saddle_to_saddle,
    vanishing_init_limit,
)
from .online import (
    LINKS,
    AttentionIndexed,
    OnlineRun,
    ScalingFit,
    Teacher,
    fit_weak_recovery,
    online_sgd,
    order_parameters,
)
from .multihead import (
    MultiHeadRun,
    EscapeRate,
    MultiHeadTeacher,
    OverlapGrowth,
    ScalingSeparation,
    batched_online,
    escape_rate,
    head_indices,
    head_order_parameters,
    multihead_loss_and_grad,
    multihead_sgd,
    overlap_growth,
    scaling_separation,
    teacher_labels,
    weighted_exponent,
)
from .escape_noise import (
    NoisyEscape,
    finite_d_drift,
    noise_drift,
    noisy_escape,
    particle_drift,
    residual_power,
    step_coefficients,
)
from .multilayer import (
    layer_indices,
    layer_order_parameters,
    two_layer_labels,
    two_layer_loss_and_grad,
    two_layer_sgd,
)
from .order_odes import (
    ODEComparison,
    OrderODE,
    TiedMomentHierarchy,
    UntiedMomentHierarchy,
    compare_with_hierarchy,
    compare_with_odes,
    free_cumulants,
    free_moments,
    linear_teacher_moments,
    linear_teacher_odes,
    tied_moment_odes,
    untied_moment_odes,
)
