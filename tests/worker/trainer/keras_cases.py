"""Cases for the Keras-semantics test: Keras trains each model with model.fit from the
weights saved in init.keras, and writes what it ended with (keras.weights.h5, the
layout of model.weights.h5) and what it reported (keras_history.json). Cohort trains
the same init.keras on the same batches (shuffle: false); the test compares the two.

Cases train small models for a few steps: enough for every update rule to act on
state it built up (momenta, moving statistics, schedules), little enough to stay fast.
"""

import json
import os

import numpy as np
import keras
from keras import layers, optimizers, losses

from keras_models import rng, save_case, write_cases

ROWS = 45  # batch 16 leaves a last batch of 13; batch 15 divides


def fit_case(root, name, model, x, y, compile_args, epochs=2, batch_size=16, compile_yaml=None,
             validation_split=None, validation_data=None):
    """compile_yaml: the job's compile section; init.keras is then saved uncompiled and
    Keras compiles with compile_args (which must mean the same) only to fit."""
    if compile_yaml is None:
        model.compile(**compile_args)
    case_dir = save_case(root, name, model, x, y, epochs, batch_size, compile_yaml,
                         validation_split, validation_data)
    if compile_yaml is not None:
        model.compile(**compile_args)
    history = model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0,
                        validation_split=validation_split or 0.0,
                        validation_data=validation_data)
    model.save_weights(os.path.join(case_dir, "keras.weights.h5"))
    with open(os.path.join(case_dir, "keras_history.json"), "w") as f:
        json.dump({k: [float(v) for v in vals] for k, vals in history.history.items()}, f)
    return {"name": name}


def mlp(units, activation=None, inputs=6):
    return keras.Sequential(
        [keras.Input((inputs,)), layers.Dense(8, activation="tanh"),
         layers.Dense(units, activation=activation)]
    )


def labels_data(r, classes):
    """x, integer labels, one-hot labels."""
    x = r.normal(size=(ROWS, 6)).astype("float32")
    labels = r.integers(0, classes, ROWS)
    return x, labels, np.eye(classes, dtype="float32")[labels]


# ---- optimizers and losses: each optimizer with one of the losses, so each is covered ----


def optimizers_group(root):
    r = rng()
    x, sparse, onehot = labels_data(r, 4)
    binary = r.integers(0, 2, (ROWS, 3)).astype("float32")
    binary1 = binary[:, :1].copy()
    regression = (x[:, :2] * 1.5 + 0.3).astype("float32")
    huber_y = (x[:, :2] * 3.0).astype("float32")  # errors on both sides of delta = 1
    cases = []
    c = cases.append

    c(fit_case(root, "sgd_mse", mlp(2), x, regression,
               dict(optimizer=optimizers.SGD(0.1), loss="mse", metrics=["mae"])))
    c(fit_case(root, "sgd_momentum_sparse_ce", mlp(4, "softmax"), x, sparse,
               dict(optimizer=optimizers.SGD(0.1, momentum=0.9),
                    loss="sparse_categorical_crossentropy", metrics=["accuracy"]),
               batch_size=15))
    c(fit_case(root, "sgd_nesterov_categorical_ce_smoothing", mlp(4, "softmax"), x, onehot,
               dict(optimizer=optimizers.SGD(0.1, momentum=0.8, nesterov=True),
                    loss=losses.CategoricalCrossentropy(label_smoothing=0.1),
                    metrics=["accuracy"])))
    c(fit_case(root, "adam_sparse_ce_logits", mlp(4), x, sparse,
               dict(optimizer=optimizers.Adam(0.01),
                    loss=losses.SparseCategoricalCrossentropy(from_logits=True),
                    metrics=["accuracy"])))
    c(fit_case(root, "adam_amsgrad_clipnorm_categorical_ce_logits", mlp(4), x, onehot,
               dict(optimizer=optimizers.Adam(0.02, amsgrad=True, clipnorm=0.05),
                    loss=losses.CategoricalCrossentropy(from_logits=True),
                    metrics=["categorical_accuracy"])))
    c(fit_case(root, "adamw_binary_ce", mlp(1, "sigmoid"), x, binary1,
               dict(optimizer=optimizers.AdamW(0.01, weight_decay=0.05),
                    loss="binary_crossentropy", metrics=["accuracy"])))
    c(fit_case(root, "rmsprop_binary_ce_logits", mlp(3), x, binary,
               dict(optimizer=optimizers.RMSprop(0.005),
                    loss=losses.BinaryCrossentropy(from_logits=True),
                    metrics=["binary_accuracy"]), batch_size=15))
    c(fit_case(root, "rmsprop_momentum_mae", mlp(2), x, regression,
               dict(optimizer=optimizers.RMSprop(0.005, momentum=0.5, global_clipnorm=1.0),
                    loss="mae", metrics=["mse"])))
    c(fit_case(root, "rmsprop_centered_huber", mlp(2), x, huber_y,
               dict(optimizer=optimizers.RMSprop(0.005, rho=0.8, centered=True),
                    loss="huber", metrics=["mae"])))
    c(fit_case(root, "adagrad_binary_ce_multi", mlp(3, "sigmoid"), x, binary,
               dict(optimizer=optimizers.Adagrad(0.1, initial_accumulator_value=0.05),
                    loss="binary_crossentropy", metrics=["accuracy"])))
    c(fit_case(root, "sgd_clipvalue_weight_decay_mse", mlp(2), x, regression,
               dict(optimizer=optimizers.SGD(0.1, clipvalue=0.05, weight_decay=0.1),
                    loss="mse", metrics=["mae"]), epochs=1))

    # Schedules: ExponentialDecay through the job's YAML (the model saved uncompiled),
    # CosineDecay with warmup through the file's compile_config.
    c(fit_case(root, "yaml_exponential_decay", mlp(4, "softmax"), x, sparse,
               dict(optimizer=optimizers.SGD(optimizers.schedules.ExponentialDecay(
                    0.2, decay_steps=2, decay_rate=0.5), momentum=0.5),
                    loss="sparse_categorical_crossentropy", metrics=["accuracy"]),
               compile_yaml="""
optimizer:
  name: sgd
  momentum: 0.5
  schedule: {name: exponential_decay, initial_learning_rate: 0.2, decay_steps: 2, decay_rate: 0.5}
loss: sparse_categorical_crossentropy
metrics: [accuracy]
"""))
    c(fit_case(root, "cosine_decay_warmup", mlp(2), x, regression,
               dict(optimizer=optimizers.Adam(optimizers.schedules.CosineDecay(
                    0.005, decay_steps=3, alpha=0.1, warmup_target=0.02, warmup_steps=2)),
                    loss="mse", metrics=["mae"])))
    write_cases(root, cases)


# ---- layers ----


def activations_model():
    """One Dense per activation, so gradients flow through each; merged by Concatenate."""
    inp = keras.Input((6,))
    h = layers.Dense(8)(inp)
    branches = []
    for act in ["linear", "relu", "sigmoid", "tanh", "softmax", "gelu", "silu", "swish", "elu",
                "selu", "softplus", "leaky_relu"]:
        branches.append(layers.Dense(4, activation=act, name=f"act_{act}")(h))
    branches.append(layers.Activation("gelu")(layers.Dense(4)(h)))
    branches.append(layers.Softmax()(layers.Dense(4)(h)))
    for kwargs in [dict(max_value=0.5), dict(negative_slope=0.1), dict(threshold=0.3),
                   dict(max_value=1.0, negative_slope=0.2, threshold=0.1), dict(max_value=6.0)]:
        branches.append(layers.ReLU(**kwargs)(layers.Dense(4)(h)))
    merged = layers.Concatenate()(branches)
    return keras.Model(inp, layers.Dense(3, activation="softmax")(merged), name="activations")


def conv2d_model():
    """Odd and even spatial sizes, so TF's "same" puts the extra padding after."""
    inp = keras.Input((9, 8, 2))
    convs = [
        layers.Conv2D(3, 3, strides=2, padding="same"),
        layers.Conv2D(3, (2, 3), strides=(2, 1), padding="same"),
        layers.Conv2D(3, 4, strides=3, padding="same"),
        layers.Conv2D(3, 3, strides=2, padding="valid"),
        layers.Conv2D(3, (3, 2), dilation_rate=2, padding="same"),
        layers.Conv2D(3, 2, dilation_rate=(1, 3), padding="valid"),
        layers.Conv2D(4, 3, groups=2, padding="same", use_bias=False),
    ]
    outs = [layers.Flatten()(conv(inp)) for conv in convs]
    merged = layers.Concatenate()(outs)
    return keras.Model(inp, layers.Dense(3, activation="softmax")(merged), name="conv2d")


def pooling_model():
    inp = keras.Input((9, 8, 2))
    h = layers.Conv2D(3, 3, padding="same", activation="relu")(inp)
    pools = [
        layers.MaxPooling2D(2),
        layers.MaxPooling2D(3, strides=2, padding="same"),
        layers.MaxPooling2D((2, 3), strides=(1, 2), padding="valid"),
        layers.AveragePooling2D(2, padding="same"),
        layers.AveragePooling2D(3, strides=2, padding="same"),
        layers.AveragePooling2D((3, 2), strides=(2, 3), padding="valid"),
    ]
    outs = [layers.Flatten()(pool(h)) for pool in pools]
    outs.append(layers.GlobalAveragePooling2D()(h))
    outs.append(layers.GlobalMaxPooling2D()(h))
    outs.append(layers.Flatten()(layers.GlobalAveragePooling2D(keepdims=True)(h)))
    merged = layers.Concatenate()(outs)
    return keras.Model(inp, layers.Dense(3, activation="softmax")(merged), name="pooling")


def no_bias_model():
    """No biases: the few-channel Conv2D loops (16 filters: a multiple of their lanes)
    fused with their MaxPooling2D, and the Dense head's products (layer_ops' Dense),
    each given an empty bias."""
    inp = keras.Input((9, 8, 2))
    h = layers.Conv2D(16, 3, activation="relu", use_bias=False)(inp)
    h = layers.Flatten()(layers.MaxPooling2D(2)(h))
    return keras.Model(inp, layers.Dense(3, activation="softmax", use_bias=False)(h),
                       name="no_bias")


def conv1d_model():
    inp = keras.Input((11,), dtype="int32")
    h = layers.Embedding(20, 5)(inp)
    outs = [
        layers.GlobalAveragePooling1D()(layers.Conv1D(4, 3, strides=2, padding="same")(h)),
        layers.GlobalAveragePooling1D()(layers.Conv1D(4, 2, padding="same")(h)),
        layers.GlobalAveragePooling1D()(
            layers.Conv1D(4, 3, dilation_rate=2, padding="causal")(h)),
        layers.Flatten()(layers.MaxPooling1D(2, padding="same")(
            layers.Conv1D(4, 4, strides=3, activation="relu")(h))),
        layers.Flatten()(layers.MaxPooling1D(3, strides=2)(h)),
    ]
    merged = layers.Concatenate()(outs)
    # A final Softmax layer: the loss sees the probabilities Keras sees.
    return keras.Model(inp, layers.Softmax()(layers.Dense(3)(merged)), name="conv1d")


def batch_norm_model():
    """BatchNormalization on a conv (channels and axis=1) and on a Dense, with custom
    momentum/epsilon, no center, and a frozen one (trainable=False: inference mode)."""
    inp = keras.Input((7, 6, 2))
    h = layers.Conv2D(4, 3, padding="same")(inp)
    h = layers.BatchNormalization()(h)
    h = layers.Activation("relu")(h)
    h = layers.BatchNormalization(axis=1, momentum=0.8, epsilon=1e-2)(h)
    h = layers.Flatten()(h)
    h = layers.Dense(8)(h)
    skip = h
    h = layers.BatchNormalization(momentum=0.9, center=False)(h)
    h = layers.Dense(8, activation="relu")(h)
    frozen = layers.BatchNormalization(scale=False)
    frozen.trainable = False
    h = frozen(h)
    h = layers.Add()([h, skip])
    return keras.Model(inp, layers.Dense(3, activation="softmax")(h), name="batch_norm")


def layer_norm_model():
    inp = keras.Input((5, 6))
    h = layers.Dense(6)(inp)
    h = layers.LayerNormalization()(h)
    h = layers.Dense(6, activation="tanh")(h)
    h = layers.LayerNormalization(axis=[1, 2], epsilon=1e-2)(h)
    h = layers.LayerNormalization(axis=1, center=False)(h)
    h = layers.Reshape((3, 10))(h)
    h = layers.Dense(4)(h)
    h = layers.Reshape((-1,))(h)
    return keras.Model(inp, layers.Activation("softmax")(layers.Dense(3)(h)), name="layer_norm")


def layers_group(root):
    r = rng()
    sparse3 = r.integers(0, 3, ROWS)
    x6 = r.normal(size=(ROWS, 6)).astype("float32")
    x_img = r.normal(size=(ROWS, 9, 8, 2)).astype("float32")
    x_bn = (r.normal(size=(ROWS, 7, 6, 2)) * 2 + 1).astype("float32")
    x_seq = r.normal(size=(ROWS, 5, 6)).astype("float32")
    tokens = r.integers(0, 20, (ROWS, 11)).astype("int32")

    def compile_args(optimizer):
        return dict(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"])

    cases = [
        fit_case(root, "activations", activations_model(), x6, sparse3,
                 compile_args(optimizers.SGD(0.2))),
        fit_case(root, "conv2d", conv2d_model(), x_img, sparse3,
                 compile_args(optimizers.SGD(0.1))),
        fit_case(root, "pooling", pooling_model(), x_img, sparse3,
                 compile_args(optimizers.SGD(0.1)), batch_size=15),
        fit_case(root, "conv1d_embedding", conv1d_model(), tokens, sparse3,
                 compile_args(optimizers.SGD(0.2))),
        fit_case(root, "batch_norm", batch_norm_model(), x_bn, sparse3,
                 compile_args(optimizers.SGD(0.05))),
        fit_case(root, "layer_norm_reshape", layer_norm_model(), x_seq, sparse3,
                 compile_args(optimizers.SGD(0.1))),
        # Last, so that the models above keep the initial weights they were tuned with.
        fit_case(root, "no_bias", no_bias_model(), x_img, sparse3,
                 compile_args(optimizers.SGD(0.1))),
    ]
    write_cases(root, cases)


# ---- validation ----


def validation_group(root):
    """Validation runs in inference mode (BatchNormalization's moving statistics) on the
    rows Keras validates on: with validation_split, Keras trains on the first
    floor(rows * (1 - split)) rows and validates on the rest, split before any
    shuffling (keras/src/trainers/data_adapters/array_slicing.py,
    train_validation_split)."""
    r = rng()
    sparse3 = r.integers(0, 3, ROWS)
    x_bn = (r.normal(size=(ROWS, 7, 6, 2)) * 2 + 1).astype("float32")
    x6 = r.normal(size=(ROWS, 6)).astype("float32")

    def args():
        return dict(optimizer=optimizers.SGD(0.05), loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"])

    cases = [
        fit_case(root, "batch_norm_validation_data", batch_norm_model(), x_bn[:33],
                 sparse3[:33], args(), validation_data=(x_bn[33:], sparse3[33:])),
        # 45 * 0.7 = 31.5: Keras trains on 31 rows and validates on 14.
        fit_case(root, "validation_split", mlp(3, "softmax"), x6, sparse3, args(),
                 validation_split=0.3),
    ]
    write_cases(root, cases)


GROUPS = {"optimizers": optimizers_group, "layers": layers_group, "validation": validation_group}


def run_group(group, root):
    GROUPS[group](root)
