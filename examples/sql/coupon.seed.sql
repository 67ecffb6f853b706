INSERT INTO coupon_stock (coupon, remaining) VALUES ('WELCOME10', 3);
