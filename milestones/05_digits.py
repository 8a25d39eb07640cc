"""Your framework learns to read handwriting: an MLP on scikit-learn's bundled digits, >= 97% test accuracy.

Run it with `./learn milestone 05` (your own package; `--epochs N` changes the length of the run). (In
the course repository, `./course milestone digits` runs it with the reference package.) The learning
curves, the confusion matrix and misclassified digits go to artifacts/milestone-digits.png.
"""
REQUIRES = ("01_tensor", "02_strides", "03_autograd", "04_layers", "05_training")

import argparse
from pathlib import Path


def main(argv=None):
    parser = argparse.ArgumentParser(prog="./learn milestone 05", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40, help="training epochs (default 40)")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    from tinytorch.training import plot_digits_result, train_digits

    result = train_digits(epochs=args.epochs)
    picture = Path("artifacts") / "milestone-digits.png"
    picture.parent.mkdir(parents=True, exist_ok=True)
    plot_digits_result(result, picture)
    accuracy = result["test_accuracy"]
    print(f"digits MLP: test accuracy {100 * accuracy:.2f}% after {args.epochs} epochs in {result['seconds']:.1f} s")
    print(f"confusion matrix and misclassified digits: {picture.resolve()}")
    passed = accuracy >= 0.97
    print("milestone 05 passed" if passed else f"milestone 05 needs >= 97% test accuracy, got {100 * accuracy:.2f}%")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
