"""Builds Keras 3 models for the common/keras tests and writes what Keras says about them.

Usage: make_models.py good|other OUT_DIR   (run with KERAS_BACKEND=jax)

good: for each model NAME, OUT_DIR gets
  NAME.config.json    config.json from the saved NAME.keras
  NAME.to_json.json   model.to_json()
  NAME.expected.json  Keras' own view: every layer's output shape (batch dropped),
                      count_params and weights, and the structure h5py sees in the
                      saved model.weights.h5 (groups with their attributes, datasets
                      with their shapes)
other: compiled models whose compile_config the tests check (NAME.config.json plus
  schedules.json with learning rates Keras computes), the accuracy rule Keras applies
  (accuracy_rule.json), and models Cohort must refuse (bad_NAME.config.json).
"""

import json
import os
import sys
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers as L  # noqa: E402

OUT = sys.argv[2]


def shape_list(shape):
    return [None if d is None else int(d) for d in shape]


def strip_ids(obj):
    if isinstance(obj, dict):
        return {k: strip_ids(v) for k, v in obj.items() if k != "shared_object_id"}
    if isinstance(obj, list):
        return [strip_ids(v) for v in obj]
    return obj


def save(model, name):
    path = os.path.join(OUT, name + ".keras")
    model.save(path)
    with zipfile.ZipFile(path) as z:
        config = z.read("config.json").decode()
        weights = os.path.join(OUT, name + ".weights.h5")
        with open(weights, "wb") as f:
            f.write(z.read("model.weights.h5"))
    with open(os.path.join(OUT, name + ".config.json"), "w") as f:
        f.write(config)
    return config, weights


def describe(model, name):
    config, weights_path = save(model, name)
    with open(os.path.join(OUT, name + ".to_json.json"), "w") as f:
        f.write(model.to_json())
    h5_groups, h5_datasets = {}, {}
    with h5py.File(weights_path, "r") as f:

        def visit(path, obj):
            if isinstance(obj, h5py.Dataset):
                h5_datasets[path] = list(obj.shape)
            else:
                h5_groups[path] = {k: str(v) for k, v in obj.attrs.items()}

        f.visititems(visit)
    layers = []
    if isinstance(model, keras.Sequential):
        # Not in model.layers: the InputLayer Keras writes first in the config.
        layers.append({
            "name": json.loads(config)["config"]["layers"][0]["config"]["name"],
            "class": "InputLayer",
            "output_shape": shape_list(model.inputs[0].shape[1:]),
            "count_params": 0,
            "weights": [],
            "in_model_layers": False,
        })
    for layer in model.layers:
        trainable_ids = {id(v) for v in layer.trainable_weights}
        saved = layer._trainable_variables + layer._non_trainable_variables
        layers.append({
            "name": layer.name,
            "class": layer.__class__.__name__,
            "output_shape": shape_list(layer.output.shape[1:]),
            "count_params": int(layer.count_params()),
            "weights": [{"name": v.name, "shape": list(v.shape),
                         "trainable": id(v) in trainable_ids} for v in saved],
            "in_model_layers": True,
        })
    expected = {
        "name": model.name,
        "kind": "Sequential" if isinstance(model, keras.Sequential) else "Functional",
        "to_json_matches": strip_ids(json.loads(config)) == strip_ids(json.loads(model.to_json())),
        "count_params": int(model.count_params()),
        "trainable_params": int(sum(np.prod(v.shape) for v in model.trainable_weights)),
        "layers": layers,
        "h5_groups": h5_groups,
        "h5_datasets": h5_datasets,
    }
    with open(os.path.join(OUT, name + ".expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


def good_models():
    mlp = keras.Sequential([
        keras.Input((784,)),
        L.Dense(64, activation="relu"),
        L.Dropout(0.2),
        L.Dense(10, activation="softmax"),
    ], name="mlp")
    mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    describe(mlp, "mlp")

    cnn = keras.Sequential([
        keras.Input((28, 28, 1)),
        L.Conv2D(4, 3, strides=2, activation="relu"),
        L.MaxPooling2D(),
        L.Conv2D(6, (3, 2), padding="same", dilation_rate=(2, 1), use_bias=False,
                 kernel_initializer="he_uniform"),
        L.AveragePooling2D(pool_size=(2, 3), strides=1, padding="same"),
        L.BatchNormalization(scale=False, momentum=0.9, epsilon=1e-5),
        L.Flatten(),
        L.Dense(16, activation="gelu", kernel_initializer="lecun_normal"),
        L.LayerNormalization(center=False),
        L.Activation("tanh"),
        L.Dense(5, kernel_initializer=keras.initializers.VarianceScaling(
            2.0, "fan_out", "untruncated_normal", seed=7)),
        L.Softmax(),
    ], name="cnn")
    describe(cnn, "cnn")

    inp = keras.Input((16, 16, 3), name="img")
    x = L.Conv2D(8, 3, padding="same", name="c1")(inp)
    x = L.BatchNormalization(name="bn1")(x)
    x = L.ReLU(name="relu")(x)
    y = L.Conv2D(8, 3, padding="same", kernel_initializer="glorot_normal", name="c2")(x)
    y = L.BatchNormalization(center=False, name="bn2")(y)
    x = L.Add(name="add")([x, y])
    x = L.MaxPooling2D(pool_size=3, strides=2, padding="same")(x)
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(10, activation="softmax", name="head")(x)
    resnet = keras.Model(inp, out, name="resnet")
    resnet.get_layer("bn1").trainable = False  # a frozen BatchNormalization
    describe(resnet, "resnet")

    tok = keras.Input((20,), dtype="int32", name="tokens")
    e = L.Embedding(100, 8, name="emb")(tok)
    a = L.Conv1D(6, 3, padding="causal", activation="elu", dilation_rate=2, name="causal")(e)
    b = L.Conv1D(4, 5, strides=2, padding="same", activation="selu", groups=2,
                 kernel_initializer="lecun_uniform", name="grouped")(e)
    a = L.MaxPooling1D(pool_size=3)(a)
    b = L.MaxPooling1D(padding="same", name="pool_b")(b)
    c = L.Concatenate(axis=1, name="concat")(
        [L.Dense(4, activation="softplus", name="soft")(a), b])
    c = L.GlobalAveragePooling1D()(c)
    c = L.Dropout(0.5, noise_shape=(None, 4), seed=3, name="drop")(c)
    c = L.Dense(3, activation="leaky_relu", bias_initializer=keras.initializers.Constant(0.5),
                kernel_initializer=keras.initializers.RandomNormal(stddev=0.1, seed=3),
                name="leaky")(c)
    c = L.Dense(2, activation="swish", kernel_initializer=keras.initializers.TruncatedNormal(),
                bias_initializer="ones", name="swish")(c)
    c = L.Dense(2, activation="sigmoid", kernel_initializer="random_uniform", name="sig")(c)
    c = L.ReLU(max_value=6.0, negative_slope=0.1, threshold=0.5, name="clip")(c)
    text = keras.Model(tok, c, name="text")
    describe(text, "text")

    # Variable-length sequences: None dimensions all the way to the pooling.
    seq = keras.Input((None,), dtype="int32", name="seq")
    s = L.Embedding(50, 4)(seq)
    s = L.Conv1D(3, 3, padding="valid")(s)
    s = L.GlobalAveragePooling1D()(s)
    s = L.Dense(1, activation="sigmoid")(s)
    describe(keras.Model(seq, s, name="vartext"), "vartext")

    shapes = keras.Input((6, 4), name="feat")
    r = L.Reshape((2, -1))(shapes)
    r = L.LayerNormalization(axis=[-2, -1])(r)
    r = L.Softmax(axis=-2)(r)
    r = L.Reshape((4, 3, 2))(r)
    r = L.GlobalMaxPooling2D(keepdims=True)(r)
    r = L.Flatten()(r)
    r = L.Concatenate()([r, L.Dense(2, use_bias=False, trainable=False)(r)])
    describe(keras.Model(shapes, r, name="shapes"), "shapes")

    # A config whose layer list is not in model.layers order (Keras never writes one,
    # a person may): Keras orders model.layers from the graph when it loads it, and
    # names the weights groups in that order. The test parses the shuffled config.
    x = keras.Input((4,), name="x")
    a = L.Dense(3, name="a")(x)
    a2 = L.Dense(3, name="a2")(a)
    b = L.Dense(3, name="b")(x)
    c = L.Add(name="c")([b, a2])
    e = L.Dense(3, name="e")(x)
    f = L.Concatenate(name="f")([c, e, a])
    out = L.Dense(2, name="d")(f)
    config = json.loads(keras.Model(x, out, name="shuffled").to_json())
    config["config"]["layers"] = [config["config"]["layers"][k] for k in (5, 2, 7, 0, 4, 1, 3, 6)]
    shuffled_json = json.dumps(config)
    describe(keras.models.model_from_json(shuffled_json), "shuffled")
    with open(os.path.join(OUT, "shuffled.config.json"), "w") as f:
        f.write(shuffled_json)

    built = keras.Sequential([L.Dense(3), L.Dense(2)], name="built")
    built.build((None, 5))
    describe(built, "built")


def compiled(name, model, **compile_args):
    model.compile(**compile_args)
    save(model, name)


def small(n_out=3):
    return keras.Sequential([keras.Input((4,)), L.Dense(n_out)])


def other_models():
    O = keras.optimizers
    S = O.schedules
    compiled("c_adam", small(), optimizer="adam", loss="sparse_categorical_crossentropy",
             metrics=["accuracy"])
    compiled("c_sgd", small(), optimizer=O.SGD(0.1, momentum=0.9, nesterov=True),
             loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
             metrics=["categorical_accuracy", keras.metrics.Accuracy()])
    exp = S.ExponentialDecay(0.1, 100, 0.96, staircase=True)
    compiled("c_rmsprop", small(), optimizer=O.RMSprop(exp, rho=0.8, momentum=0.1, centered=True),
             loss=keras.losses.Huber(delta=2.0), metrics=[keras.metrics.MeanAbsoluteError(), "mse"])
    cos = S.CosineDecay(0.01, 1000, alpha=0.1, warmup_target=0.1, warmup_steps=50)
    compiled("c_adamw", small(1), optimizer=O.AdamW(cos, weight_decay=0.01, amsgrad=True),
             loss=keras.losses.BinaryCrossentropy(from_logits=True),
             metrics=[keras.metrics.BinaryAccuracy(threshold=0.7)])
    compiled("c_adagrad", small(), optimizer=O.Adagrad(0.05, initial_accumulator_value=0.2,
                                                       epsilon=1e-6, clipnorm=1.0),
             loss=keras.losses.mean_absolute_error, metrics=[keras.metrics.mean_squared_error])
    compiled("c_mse", small(), optimizer=O.Adam(global_clipnorm=2.0), loss="mse",
             metrics=["mae", "acc"])
    compiled("c_list", small(), optimizer="sgd", loss=["mae"], metrics=[["mean_squared_error"]],
             loss_weights=[0.5])
    compiled("c_noloss", small(), optimizer="rmsprop")
    compiled("bad_ema", small(), optimizer=O.Adam(use_ema=True), loss="mse")
    compiled("bad_loss", small(), optimizer="adam", loss="kl_divergence")
    compiled("bad_optimizer", small(), optimizer="nadam", loss="mse")
    exp2 = S.ExponentialDecay(0.1, 7, 0.5)
    cos2 = S.CosineDecay(0.02, 30, alpha=0.2)
    steps = [0, 1, 3, 7, 10, 29, 30, 49, 50, 51, 500, 1049, 2000]
    rates = {
        "exp_staircase": [float(exp(s)) for s in steps],
        "exp": [float(exp2(s)) for s in steps],
        "cos_warmup": [float(cos(s)) for s in steps],
        "cos": [float(cos2(s)) for s in steps],
    }
    with open(os.path.join(OUT, "schedules.json"), "w") as f:
        json.dump({"steps": steps, "rates": rates}, f)

    from keras.src.trainers.compile_utils import is_binary_or_sparse_categorical
    rule = []
    for y_row, out_row in [((), (10,)), ((1,), (10,)), ((10,), (10,)), ((1,), (1,)), ((), (1,)),
                           ((5, 1), (5, 7)), ((5,), (5, 7)), ((3,), (3,))]:
        binary, sparse = is_binary_or_sparse_categorical(
            keras.KerasTensor((8,) + y_row), keras.KerasTensor((8,) + out_row))
        rule.append({"y": list(y_row), "out": list(out_row), "binary": bool(binary),
                     "sparse": bool(sparse)})
    with open(os.path.join(OUT, "accuracy_rule.json"), "w") as f:
        json.dump(rule, f)

    save(keras.Sequential([keras.Input((5, 3)), L.LSTM(4, name="lstm_1"), L.Dense(1)]), "bad_lstm")
    inner = keras.Sequential([keras.Input((4,)), L.Dense(3)], name="inner")
    i = keras.Input((4,))
    save(keras.Model(i, L.Dense(2)(inner(i))), "bad_nested")
    shared = L.Dense(4, name="shared_dense")
    i = keras.Input((4,))
    save(keras.Model(i, L.Dense(1)(shared(shared(i)))), "bad_shared")
    a, b = keras.Input((4,), name="a"), keras.Input((4,), name="b")
    save(keras.Model([a, b], L.Add()([a, b])), "bad_two_inputs")
    a = keras.Input((4,), name="a")
    save(keras.Model(a, [L.Dense(2, name="head1")(a), L.Dense(3, name="head2")(a)]),
         "bad_two_outputs")
    save(keras.Sequential([keras.Input((3, 8, 8)),
                           L.Conv2D(2, 3, data_format="channels_first", name="cf")]),
         "bad_channels_first")
    save(keras.Sequential([keras.Input((5,)), L.Embedding(10, 4, mask_zero=True, name="emb")]),
         "bad_mask_zero")
    save(keras.Sequential([keras.Input((4,)), L.Dense(3, dtype="mixed_float16", name="half")]),
         "bad_mixed")
    save(keras.Sequential([keras.Input((4,)), L.Dense(3, kernel_regularizer="l2", name="reg")]),
         "bad_regularizer")
    save(keras.Sequential([keras.Input((4,)), L.Dense(3, kernel_initializer="orthogonal",
                                                      name="ortho")]), "bad_orthogonal")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    {"good": good_models, "other": other_models}[sys.argv[1]]()
