from django.shortcuts import render

from orgs.permissions import org_required


@org_required()
def dashboard(request):
    return render(request, "audits/dashboard.html", {})


@org_required()
def incident_list(request):
    return render(request, "placeholder.html", {"title": "Incidents"})


@org_required()
def audit_list(request):
    return render(request, "placeholder.html", {"title": "Audits"})


@org_required()
def review_queue(request):
    return render(request, "placeholder.html", {"title": "Review queue"})
