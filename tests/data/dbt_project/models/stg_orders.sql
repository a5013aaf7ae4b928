select
    order_id,
    customer_id,
    cast(amount as decimal(10, 2)) as amount
from {{ ref('raw_orders') }}
where status <> 'returned'
