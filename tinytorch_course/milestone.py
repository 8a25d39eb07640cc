"""`milestone digits`: module 05's MLP trained on scikit-learn's bundled digits (no download)."""
from pathlib import Path


def digits(root, epochs=40, log=print):
    """Train with `tinytorch.training.train_digits`, save the picture; exit status 1 below 97%."""
    import matplotlib
    matplotlib.use("Agg")
    from tinytorch.training import plot_digits_result, train_digits

    result = train_digits(epochs=epochs)
    picture = Path(root) / "artifacts" / "milestone-digits.png"
    picture.parent.mkdir(parents=True, exist_ok=True)
    plot_digits_result(result, picture)
    accuracy = result["test_accuracy"]
    log(f"digits MLP: test accuracy {100 * accuracy:.2f}% after {epochs} epochs in {result['seconds']:.1f} s")
    log(f"confusion matrix and misclassified digits: {picture}")
    return 0 if accuracy >= 0.97 else 1
