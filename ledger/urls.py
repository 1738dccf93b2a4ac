from django.urls import path

from ledger import views

urlpatterns = [
    path("stores/", views.store_list, name="store-list"),
    path("ledger/", views.ledger_page, name="ledger"),
]
