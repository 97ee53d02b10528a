// An HTTP API whose POST /orders creates an order at most once per Idempotency-Key
// and caller: a retry gets the stored response replayed.
//
//	IDEMD_ADDR=127.0.0.1:50051 IDEMD_TOKEN=idem_... go run ./examples/shop
//	curl -X POST localhost:8080/orders -H 'Authorization: Bearer alice' \
//	  -H 'Idempotency-Key: "order-1001"' -d '{"sku":"book-42"}'
package main

import (
	"fmt"
	"log"
	"net/http"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemdhttp"
)

func main() {
	client, err := idemd.New()
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	orders := http.NewServeMux()
	orders.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		attempt, _ := idemd.AttemptFromContext(r.Context())
		// Create the order here, with attempt.OperationID as the provider's key.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+attempt.OperationID)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%q}`, attempt.OperationID)
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", idemdhttp.Middleware(client)(orders)))
}
