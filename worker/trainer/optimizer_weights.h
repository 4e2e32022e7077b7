#pragma once

// The optimizer's state as Keras 3 saves it in model.weights.h5, so that Keras'
// load_model restores a compiled model's optimizer too (instead of warning "Skipping
// variable loading for optimizer") and training can go on in Keras where Cohort stopped.
//
// The group "optimizer/vars" holds, as Keras 3.15 orders them: "iteration" (int32),
// "learning_rate" (float32; absent when the rate is a schedule), then the slots of each
// trainable variable in model.trainable_variables order, each in its variable's Keras
// layout: Adam/AdamW momentum and velocity interleaved per variable, then every
// velocity_hat (amsgrad); SGD every momentum (none without momentum); RMSprop every
// velocity, then every momentum, then every average_gradient; Adagrad every accumulator.

#include "worker/trainer/flat_parameters.h"
#include "worker/trainer/keras_model.h"
#include "worker/trainer/optimizer.h"
#include "worker/trainer/weights/keras_weights.h"

namespace cohort::trainer {

// `flat` holds `model`'s trainable variables and `optimizer` updates it.
KerasVarGroup OptimizerVarGroup(const KerasModel& model, const FlatParameters& flat,
                                const Optimizer& optimizer);

// Whether optimizers configured as `a` and `b` have the same variables (kind, slots,
// learning rate as a variable or a schedule): Keras loads a saved optimizer state only
// into the optimizer it was saved from.
bool SameOptimizerVariables(const keras::OptimizerConfig& a, const keras::OptimizerConfig& b);

}  // namespace cohort::trainer
