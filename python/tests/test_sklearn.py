"""scikit-learn models as skl2onnx writes them (the ai.onnx.ml domain: linear models, trees,
forests, boosting, preprocessing; k-nearest neighbours as a Scan, unrolled at pack time),
compared with onnxruntime: labels identical, probabilities and regression outputs within 1e-5."""

import numpy as np
import onnxruntime as ort
import pytest
import warnings
from skl2onnx import to_onnx
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.impute import SimpleImputer
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge, RidgeClassifier, SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Binarizer, MaxAbsScaler, MinMaxScaler, Normalizer, StandardScaler
from sklearn.svm import SVC, SVR, LinearSVR

import ferrite

# scikit-learn 1.9 deprecates SVC's probability attributes that skl2onnx still reads.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

OPSETS = {"": 17, "ai.onnx.ml": 3}


def convert(model, x):
    return to_onnx(model, x[:1], target_opset=OPSETS)


def reference(onnx_model, x):
    s = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"X": x})


def ferrite_run(onnx_model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the symbolic batch, fixed here
        session = ferrite.Session(onnx_model, input_shapes={"X": x.shape})
    return session.run({"X": x})


def probabilities(zipped, labels):
    """onnxruntime's ZipMap output (a list of {label: p}) as a matrix in label order."""
    if isinstance(zipped, np.ndarray):
        return zipped
    return np.array([[row[c] for c in labels] for row in zipped], np.float32)


def data(loader, labels=None):
    x, y = loader(return_X_y=True)
    x = x.astype(np.float32)
    if labels is not None:
        y = np.asarray(labels)[y]
    return x, y


CLASSIFIERS = {
    "scaled_logistic_iris": lambda: (make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), data(load_iris)),
    "logistic_binary_cancer": lambda: (make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), data(load_breast_cancer)),
    "logistic_labels_3_5_7_wine": lambda: (make_pipeline(MinMaxScaler(), LogisticRegression(max_iter=1000)), data(load_wine, [3, 5, 7])),
    "normalized_ridge_classifier_iris": lambda: (make_pipeline(Normalizer("l2"), RidgeClassifier()), data(load_iris)),
    "l1_normalized_sgd_wine": lambda: (make_pipeline(Normalizer("l1"), SGDClassifier(loss="log_loss", random_state=0)), data(load_wine)),
    "max_norm_logistic_wine": lambda: (make_pipeline(Normalizer("max"), MaxAbsScaler(), LogisticRegression(max_iter=2000)), data(load_wine)),
    "binarized_logistic_iris": lambda: (make_pipeline(Binarizer(threshold=3.0), LogisticRegression(max_iter=1000)), data(load_iris)),
    "decision_tree_iris": lambda: (DecisionTreeClassifier(max_depth=4, random_state=0), data(load_iris)),
    "random_forest_wine": lambda: (RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0), data(load_wine)),
    "random_forest_binary_cancer": lambda: (RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0), data(load_breast_cancer)),
    "gradient_boosting_iris": lambda: (GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0), data(load_iris, [3, 5, 7])),
    "gradient_boosting_binary_cancer": lambda: (make_pipeline(StandardScaler(), GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0)), data(load_breast_cancer)),
    "svc_rbf_iris": lambda: (make_pipeline(StandardScaler(), SVC(kernel="rbf")), data(load_iris)),
    "svc_rbf_binary_cancer": lambda: (make_pipeline(StandardScaler(), SVC(kernel="rbf", C=2.0)), data(load_breast_cancer)),
    "svc_poly_wine": lambda: (make_pipeline(StandardScaler(), SVC(kernel="poly", degree=2)), data(load_wine, [3, 5, 7])),
    "svc_linear_iris": lambda: (make_pipeline(StandardScaler(), SVC(kernel="linear")), data(load_iris)),
    "svc_sigmoid_cancer": lambda: (make_pipeline(StandardScaler(), SVC(kernel="sigmoid", gamma=0.01)), data(load_breast_cancer)),
}


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifiers_match_onnxruntime(name):
    model, (x, y) = CLASSIFIERS[name]()
    model.fit(x, y)
    onnx_model = convert(model, x)
    want = reference(onnx_model, x)
    got = ferrite_run(onnx_model, x)
    labels = list(model.classes_)
    label, scores = (o.name for o in onnx_model.graph.output)
    np.testing.assert_array_equal(got[label], want[0])
    np.testing.assert_allclose(got[scores], probabilities(want[1], labels), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[label], model.predict(x))


REGRESSORS = {
    "linear_diabetes": lambda: make_pipeline(StandardScaler(), LinearRegression()),
    "ridge_diabetes": lambda: Ridge(alpha=0.5),
    "imputed_linear_svr": lambda: make_pipeline(SimpleImputer(strategy="mean"), StandardScaler(), LinearSVR(max_iter=20000)),
    "decision_tree_diabetes": lambda: DecisionTreeRegressor(max_depth=5, random_state=0),
    "random_forest_diabetes": lambda: RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0),
    "gradient_boosting_diabetes": lambda: GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0),
    "svr_rbf_diabetes": lambda: make_pipeline(StandardScaler(), SVR(kernel="rbf", C=50.0)),
    "svr_poly_diabetes": lambda: make_pipeline(StandardScaler(), SVR(kernel="poly", degree=3, C=10.0)),
}


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressors_match_onnxruntime(name):
    x, y = data(load_diabetes)
    model = REGRESSORS[name]()
    model.fit(x, y)
    if name.startswith("imputed"):
        x = x.copy()
        x[::7, 2] = np.nan  # missing values the imputer replaces
    onnx_model = convert(model, x)
    (want,) = reference(onnx_model, x)
    got = ferrite_run(onnx_model, x)["variable"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


NEIGHBOURS = {
    "knn_iris": lambda: (KNeighborsClassifier(n_neighbors=5), data(load_iris)),
    "scaled_knn_distance_wine": lambda: (make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=3, weights="distance")), data(load_wine, [3, 5, 7])),
    "knn_binary_cancer": lambda: (KNeighborsClassifier(n_neighbors=7), data(load_breast_cancer)),
    "knn_regressor_diabetes": lambda: (KNeighborsRegressor(n_neighbors=4), data(load_diabetes)),
    "knn_distance_regressor_diabetes": lambda: (KNeighborsRegressor(n_neighbors=4, weights="distance"), data(load_diabetes)),
}


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_nearest_neighbours_match_onnxruntime(name):
    """skl2onnx computes the distances to the training rows in a Scan over them, which Ferrite
    unrolls at pack time: fitted on every other row (the Scan's length), scored on all rows."""
    model, (x, y) = NEIGHBOURS[name]()
    model.fit(x[::2], y[::2])
    onnx_model = to_onnx(model, x[:1], target_opset=OPSETS, options={id(model): {"zipmap": False}} if "regressor" not in name else None)
    assert "Scan" in {n.op_type for n in onnx_model.graph.node}
    want = reference(onnx_model, x)
    got = ferrite_run(onnx_model, x)
    names = [o.name for o in onnx_model.graph.output]
    if "regressor" in name:
        np.testing.assert_allclose(got[names[0]], want[0], rtol=1e-5, atol=1e-4)
        return
    np.testing.assert_array_equal(got[names[0]], want[0])
    np.testing.assert_allclose(got[names[1]], want[1], rtol=1e-5, atol=1e-5)
    if "distance" not in name:  # skl2onnx weighs a zero distance unlike scikit-learn
        np.testing.assert_array_equal(got[names[0]], model.predict(x))


@pytest.mark.parametrize("unknown", ["error", "ignore"])
def test_one_hot_encoded_categories_match_onnxruntime(unknown):
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    x = np.c_[rng.integers(0, 4, 200), rng.integers(0, 3, 200)].astype(np.int64)
    y = (x[:, 0] + x[:, 1] > 3).astype(int)
    model = make_pipeline(OneHotEncoder(handle_unknown=unknown), LogisticRegression())
    model.fit(x, y)
    onnx_model = convert(model, x)
    want = reference(onnx_model, x)
    got = ferrite_run(onnx_model, x)
    label, scores = (o.name for o in onnx_model.graph.output)
    np.testing.assert_array_equal(got[label], want[0])
    np.testing.assert_allclose(got[scores], probabilities(want[1], [0, 1]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "keys,values,x",
    [
        ({"keys_int64s": [3, 7, 11]}, {"values_int64s": [0, 1, 2], "default_int64": -5}, np.array([[3, 4], [11, 7]], np.int64)),
        ({"keys_floats": [0.5, 1.5]}, {"values_int64s": [10, 20]}, np.array([0.5, 1.5, 2.5, -0.5], np.float32)),
        ({"keys_int64s": [1, 2]}, {"values_floats": [0.25, -4.0], "default_float": 9.0}, np.array([2, 1, 0], np.int64)),
    ],
)
def test_label_encoder_matches_onnxruntime(keys, values, x):
    import onnx
    import onnx.helper as oh

    elem = {np.int64: onnx.TensorProto.INT64, np.float32: onnx.TensorProto.FLOAT}
    out_type = onnx.TensorProto.FLOAT if "values_floats" in values else onnx.TensorProto.INT64
    node = oh.make_node("LabelEncoder", ["X"], ["Y"], domain="ai.onnx.ml", **keys, **values)
    graph = oh.make_graph(
        [node], "g", [oh.make_tensor_value_info("X", elem[x.dtype.type], list(x.shape))],
        [oh.make_tensor_value_info("Y", out_type, list(x.shape))],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("ai.onnx.ml", 2)])
    model.ir_version = 8
    (want,) = reference(model, x)
    got = ferrite_run(model, x)["Y"]
    np.testing.assert_array_equal(got, want)


def test_zip_map_is_returned_as_a_tensor_with_a_note():
    model, (x, y) = CLASSIFIERS["scaled_logistic_iris"]()
    model.fit(x, y)
    _, report = ferrite.pack(convert(model, x), input_shapes={"X": (4, 4)})
    assert any("ZipMap" in n and "probability tensor" in n for n in report["notes"]), report["notes"]
