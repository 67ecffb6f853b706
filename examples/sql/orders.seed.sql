INSERT INTO shop_order (order_no, amount, status) VALUES ('o1', 25.00, 'UNPAID');
INSERT INTO shop_order (order_no, amount, status) VALUES ('o2', 9.90, 'UNPAID');
INSERT INTO shop_order (order_no, amount, status) VALUES ('o3', 5.00, 'CANCELLED');
