"""A PyTorch model as a paramgeo plugin file: `paramgeo --plugin examples/torch_model.py ...`.

A tanh network with biases on 30 fixed inputs; paramgeo reads its layers (Linear, Tanh,
Linear), so the hidden neurons' sign flips and permutations are declared and `critical` names
neurons."""

import numpy as np
import torch

import paramgeo

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
inputs = np.random.default_rng(0).standard_normal((30, 3))  # the probe batch
model = paramgeo.from_torch(net, inputs, name="torch-tanh")
