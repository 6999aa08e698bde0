"""The form for one model's price (a new version of the table on save)."""

from django import forms

from traces.pricing.analysis.list_prices import AS_OF

RATE_HELP = "Dollars per million tokens."


def _rate(label: str) -> forms.DecimalField:
    return forms.DecimalField(
        label=label, min_value=0, max_digits=12, decimal_places=6, help_text=RATE_HELP
    )


class ModelPriceForm(forms.Form):
    model = forms.CharField(
        max_length=200,
        help_text="As the harness reports it, without the date tag: claude-sonnet-4-5 also "
        "prices claude-sonnet-4-5-20250929.",
    )
    aliases = forms.CharField(
        required=False,
        max_length=1000,
        help_text="Other names of the same model, separated by spaces or commas.",
    )
    input = _rate("Input")
    output = _rate("Output")
    cache_read = _rate("Cache read")
    cache_write_5m = _rate("Cache write, 5 minutes")
    cache_write_1h = _rate("Cache write, 1 hour")
    as_of = forms.DateField(label="As of", help_text="The date these were the prices (YYYY-MM-DD).")
    source = forms.CharField(
        max_length=500, help_text="Where the rates come from: a pricing page, a contract."
    )
    note = forms.CharField(
        required=False, max_length=500, help_text="Why this version (kept in the history)."
    )

    def price(self) -> dict:
        data = dict(self.cleaned_data)
        data["aliases"] = data["aliases"].replace(",", " ").split()
        data.pop("note", None)
        return data

    @classmethod
    def initial_for(cls, price=None, model: str = "") -> dict:
        if price is None:
            return {"model": model, "as_of": AS_OF.isoformat()}
        return {
            "model": price.model,
            "aliases": " ".join(price.aliases),
            "input": price.input_rate.normalize(),
            "output": price.output_rate.normalize(),
            "cache_read": price.cache_read_rate.normalize(),
            "cache_write_5m": price.cache_write_5m_rate.normalize(),
            "cache_write_1h": price.cache_write_1h_rate.normalize(),
            "as_of": price.as_of.isoformat(),
            "source": price.source,
        }
