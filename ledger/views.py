from django.shortcuts import render

from orgs.permissions import org_required


@org_required()
def store_list(request):
    return render(request, "placeholder.html", {"title": "Stores"})


@org_required()
def ledger_page(request):
    return render(request, "placeholder.html", {"title": "Ledger"})
