"""Losses: on predictors with their pull-back to parameters (:mod:`.predictor`), on a model's
outputs against targets (:mod:`.outputs`), and built from the named arrays of a data file
(:mod:`.data`)."""

from .data import loss_from_arrays
from .outputs import CrossEntropy, SquaredError
from .predictor import (CallableLoss, Exponential, LinearMeasurements, Logistic, Loss, MaxMargin,
                        QuadraticMeasurements, Regression, batched_value_and_grad, loss_hessian,
                        max_margin, pullback, value_and_grad)

__all__ = ["CallableLoss", "CrossEntropy", "Exponential", "LinearMeasurements", "Logistic", "Loss",
           "MaxMargin", "QuadraticMeasurements", "Regression", "SquaredError",
           "batched_value_and_grad", "loss_from_arrays", "loss_hessian", "max_margin", "pullback",
           "value_and_grad"]
